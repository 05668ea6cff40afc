"""openenv_gym: agentic RL environments as Gymnasium envs, served with one isolated session each.

    import gymnasium as gym
    import openenv_gym  # registers openenv/echo, openenv/guess, ...

    env = gym.make("openenv/guess")

Importing registers the environments and stays light; the client, server and env classes load
on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from openenv_gym.errors import *  # noqa: F403  (the typed errors are part of the public API)
from openenv_gym.errors import __all__ as _error_names  # type: ignore[attr-defined]
from openenv_gym.registry import register_all

__version__ = "0.1.0"

_LAZY = {
    "connect": "openenv_gym.client.connection",
    "Connection": "openenv_gym.client.connection",
    "Session": "openenv_gym.client.connection",
    "RemoteEnv": "openenv_gym.env",
    "Environment": "openenv_gym.environment",
    "StepResult": "openenv_gym.environment",
    "ResetResult": "openenv_gym.environment",
    "ToolEnvironment": "openenv_gym.tools",
    "tool": "openenv_gym.tools",
    "UnicodeText": "openenv_gym.spaces",
    "ToolCallSpace": "openenv_gym.spaces",
}

__all__ = [
    "Connection", "Environment", "RemoteEnv", "ResetResult", "Session", "StepResult", "ToolCallSpace",
    "ToolEnvironment", "UnicodeText", "__version__", "connect", "register_all", "tool",
    *_error_names,
]

if TYPE_CHECKING:
    from openenv_gym.client.connection import Connection, Session, connect
    from openenv_gym.env import RemoteEnv
    from openenv_gym.environment import Environment, ResetResult, StepResult
    from openenv_gym.spaces import ToolCallSpace, UnicodeText
    from openenv_gym.tools import ToolEnvironment, tool


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'openenv_gym' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


register_all()

"""openenv_gym: agentic RL environments as Gymnasium envs, served with one isolated session each.

    import gymnasium as gym
    import openenv_gym  # registers openenv/echo, openenv/guess, ...

    env = gym.make("openenv/guess")

Importing registers the environments and stays light; the client, server and env classes load
on first use.
"""

from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING, Any

from openenv_gym.errors import *  # noqa: F403  (the typed errors are part of the public API)
from openenv_gym.errors import __all__ as _error_names  # type: ignore[attr-defined]
from openenv_gym.runtime.lifetime import FORK_SERVER

__version__ = "0.1.0"

_LAZY = {
    "register_all": "openenv_gym.registry",
    "connect": "openenv_gym.client.native.handshake",
    "Connection": "openenv_gym.client.native.connection",
    "Session": "openenv_gym.client.native.session",
    "AsyncVectorClient": "openenv_gym.client.vector",
    "RemoteEnv": "openenv_gym.env",
    "RemoteVectorEnv": "openenv_gym.vector",
    "Environment": "openenv_gym.adapters.environment",
    "ToolEnvironment": "openenv_gym.adapters.tools",
    "tool": "openenv_gym.adapters.tools",
    "StepResult": "openenv_gym.episode.results",
    "ResetResult": "openenv_gym.episode.results",
    "FinishedEpisode": "openenv_gym.episode.groups",
    "invalid_action": "openenv_gym.episode.results",
    "UnicodeText": "openenv_gym.spaces",
    "ToolCallSpace": "openenv_gym.spaces",
    "serve": "openenv_gym.server.launch",
    "rollouts": "openenv_gym.rollout.stream",
    "OpenAIPolicy": "openenv_gym.rollout.openai",
    "Reply": "openenv_gym.rollout.turns",
    "Episode": "openenv_gym.rollout.records",
    "Group": "openenv_gym.rollout.groups",
}

__all__ = [
    "AsyncVectorClient", "Connection", "Environment", "Episode", "FinishedEpisode", "Group", "OpenAIPolicy",
    "RemoteEnv", "RemoteVectorEnv", "Reply", "ResetResult", "Session", "StepResult", "ToolCallSpace", "ToolEnvironment",
    "UnicodeText", "__version__", "connect", "invalid_action", "register_all", "rollouts", "serve", "tool",
    *_error_names,
]

if TYPE_CHECKING:
    from openenv_gym.adapters.environment import Environment
    from openenv_gym.adapters.tools import ToolEnvironment, tool
    from openenv_gym.client.native.connection import Connection
    from openenv_gym.client.native.handshake import connect
    from openenv_gym.client.native.session import Session
    from openenv_gym.client.vector import AsyncVectorClient
    from openenv_gym.env import RemoteEnv
    from openenv_gym.episode.groups import FinishedEpisode
    from openenv_gym.episode.results import ResetResult, StepResult, invalid_action
    from openenv_gym.registry import register_all
    from openenv_gym.rollout.groups import Group
    from openenv_gym.rollout.openai import OpenAIPolicy
    from openenv_gym.rollout.records import Episode
    from openenv_gym.rollout.stream import rollouts
    from openenv_gym.rollout.turns import Reply
    from openenv_gym.server.launch import serve
    from openenv_gym.spaces import ToolCallSpace, UnicodeText
    from openenv_gym.vector import RemoteVectorEnv


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'openenv_gym' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


if FORK_SERVER not in os.environ:  # (the fork server needs no gym ids: gymnasium and numpy would double every fork)
    from openenv_gym.registry import register_all

    register_all()

"""The server-side environment interface: what every shipped env and every adapter implements.

One instance serves one session. The server knows nothing else about an environment: it calls
`describe()` on the class once, then `reset`, `step` and `close` on each instance.

Write the methods as `async def`. Code that blocks (CPU-heavy work, blocking I/O) may instead be
written as plain `def`: the server then runs that method in a worker thread, off the event loop.
An async method that never awaits completes inline, with no task and no thread: the fast path.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from openenv_gym.protocol import Action


@dataclass(slots=True)
class StepResult:
    obs: str
    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False
    info: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class ResetResult:
    obs: str
    info: dict[str, Any] = field(default_factory=dict)


class Environment:
    """Base class of server-side environments. Subclasses set `name` and implement reset and step."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    action_kind: ClassVar[Literal["text", "tools"]] = "text"
    max_steps: ClassVar[int | None] = None

    @classmethod
    def describe(cls) -> dict[str, Any]:
        """What clients learn about this environment: shown by /info and used to build gym spaces."""
        return {
            "name": cls.name or cls.__name__,
            "description": cls.description or (cls.__doc__ or "").strip().split("\n")[0],
            "action": cls.action_kind,
            "tools": [],
            "max_steps": cls.max_steps,
        }

    async def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> ResetResult:
        raise NotImplementedError

    async def step(self, action: Action) -> StepResult:
        raise NotImplementedError

    async def close(self) -> None:
        """Release what the instance holds. Called once when its session ends."""


def invalid_action(message: str, *, reward: float = 0.0, truncated: bool = False) -> StepResult:
    """The error observation an environment answers an unusable action with (not an exception)."""
    return StepResult(
        obs=f"Invalid action: {message}",
        reward=reward,
        truncated=truncated,
        info={"error": {"code": "invalid_action", "message": message}},
    )

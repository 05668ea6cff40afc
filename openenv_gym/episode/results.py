"""What one reset or step returns, and the rules for what goes in it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypeAlias

Action: TypeAlias = str | dict[str, Any]
"""Raw model text, or a tool call `{"name": str, "arguments": {...}}`."""

INVALID_ACTION = "invalid_action"  # the error code of an action the environment cannot use


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


def invalid_action(message: str, *, reward: float = 0.0) -> StepResult:
    """The error observation an unusable action is answered with: a step, never an exception."""
    return StepResult(f"Invalid action: {message}", reward,
                      info={"error": {"code": INVALID_ACTION, "message": message}})


def episode_failure(info: dict[str, Any]) -> str | None:
    """Why an episode failed, read from the info of its last step: an error there other than an invalid action (the
    env's own run raised, its verifier or judge gave no verdict, its program fell silent) means its reward is no
    score of the replies. "code: message", or None."""
    error = info.get("error")
    if not isinstance(error, dict) or error.get("code") == INVALID_ACTION:
        return None
    return f"{error.get('code')}: {error.get('message')}"


def reward_of(raw: Any, info: dict[str, Any]) -> float:
    """A reward that may be missing: None counts as 0.0, and the raw value is kept in info["reward_raw"]."""
    info["reward_raw"] = raw
    return 0.0 if raw is None else float(raw)

"""echo: the observation repeats the action text; reward = len(message) / 10.

An episode ends (truncated) after `max_steps` steps, 10 by default; change it with
reset(options={"max_steps": n}).
"""

from __future__ import annotations

from openenv_gym.environment import Environment, ResetResult, StepResult, invalid_action
from openenv_gym.errors import BadRequestError


class EchoEnv(Environment):
    """Echoes each message back; reward = len(message) / 10."""

    name = "echo"
    action_kind = "text"
    max_steps = 10

    async def reset(self, *, seed=None, options=None) -> ResetResult:
        max_steps = (options or {}).get("max_steps", self.max_steps)
        if type(max_steps) is not int or max_steps < 1:
            raise BadRequestError(f"option max_steps must be a positive integer, got {max_steps!r}")
        self.limit = max_steps
        self.steps = 0
        return ResetResult("Send me a message and I will echo it.", {"max_steps": max_steps})

    async def step(self, action) -> StepResult:
        self.steps += 1
        truncated = self.steps >= self.limit
        if type(action) is not str:
            return invalid_action("echo takes a text message as its action", truncated=truncated)
        return StepResult(action, len(action) / 10, False, truncated, {"step": self.steps})

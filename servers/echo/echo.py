"""echo: the observation repeats the action text; reward = len(message) / 10.

An episode ends (truncated) after `max_steps` steps, 10 by default; change it with
reset(options={"max_steps": n}) (the server enforces the limit).
"""

from __future__ import annotations

from openenv_gym import Environment, ResetResult, StepResult, invalid_action


class EchoEnv(Environment):
    """Echoes each message back; reward = len(message) / 10."""

    name = "echo"
    action_kind = "text"
    max_steps = 10
    reset_options = frozenset()  # none of its own: the server's max_steps is always taken

    async def reset(self, *, seed=None, options=None) -> ResetResult:
        self.steps = 0
        return ResetResult("Send me a message and I will echo it.",
                           {"max_steps": (options or {}).get("max_steps", self.max_steps)})

    async def step(self, action) -> StepResult:
        self.steps += 1
        if type(action) is not str:
            return invalid_action("echo takes a text message as its action")
        return StepResult(action, len(action) / 10, False, False, {"step": self.steps})

"""Find a hidden number with two MCP tools: guess(number) answers higher, lower or correct (reward 1, done);
hint() tells whether the number is even. The state tells the range known so far and the guesses made."""

import random
from typing import Any
from uuid import uuid4

from fastmcp import FastMCP
from openenv.core.env_server.mcp_environment import MCPEnvironment
from openenv.core.env_server.mcp_types import CallToolAction

try:
    from ..models import GuessObservation, GuessState
except ImportError:
    from models import GuessObservation, GuessState


class GuessEnvironment(MCPEnvironment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        mcp = FastMCP("guess")

        @mcp.tool
        def guess(number: int) -> str:
            """Guess the hidden number: answers higher, lower or correct."""
            return self._guess(number)

        @mcp.tool
        def hint() -> str:
            """Tell whether the hidden number is even."""
            return "even" if self._secret % 2 == 0 else "odd"

        super().__init__(mcp)
        self._secret = 0
        self._solved = False
        self._state = GuessState(episode_id=None, step_count=0)

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> GuessObservation:
        high = int(kwargs.get("high", 100))
        self._secret = random.Random(seed).randint(1, high)
        self._solved = False
        self._state = GuessState(episode_id=episode_id or str(uuid4()), step_count=0, low=1, high=high)
        return GuessObservation(text=f"Find the number between 1 and {high}. Tools: guess(number), hint().")

    def _guess(self, number: int) -> str:
        self._state.guesses += 1
        if number == self._secret:
            self._solved = True
            return f"{number} is correct"
        if number < self._secret:
            self._state.low = max(self._state.low, number + 1)
            return f"higher than {number}"
        self._state.high = min(self._state.high, number - 1)
        return f"lower than {number}"

    def _scored(self, action: Any, observation: Any) -> Any:
        if isinstance(action, CallToolAction):
            self._state.step_count += 1
            observation.reward = 1.0 if self._solved else 0.0
            observation.done = self._solved
        return observation

    def step(self, action: Any, timeout_s: float | None = None, **kwargs: Any) -> Any:
        return self._scored(action, super().step(action, timeout_s=timeout_s, **kwargs))

    async def step_async(self, action: Any, timeout_s: float | None = None, **kwargs: Any) -> Any:
        return self._scored(action, await super().step_async(action, timeout_s=timeout_s, **kwargs))

    def _step_impl(self, action: Any, timeout_s: float | None = None, **kwargs: Any) -> GuessObservation:
        return GuessObservation(text="use the tools guess(number) and hint()")

    @property
    def state(self) -> GuessState:
        return self._state

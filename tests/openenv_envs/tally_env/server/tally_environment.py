"""The tally environment: the episode ends when the total reaches ten; each step's reward is its delta."""

from typing import Any
from uuid import uuid4

from openenv.core.env_server.interfaces import Environment

try:
    from ..models import TallyAction, TallyObservation, TallyState
except ImportError:
    from models import TallyAction, TallyObservation, TallyState

GOAL = 10


class TallyEnvironment(Environment[TallyAction, TallyObservation, TallyState]):
    SUPPORTS_CONCURRENT_SESSIONS: bool = True

    def __init__(self) -> None:
        self._state = TallyState(episode_id=str(uuid4()), step_count=0)

    def reset(self, seed: int | None = None, episode_id: str | None = None, start: int = 0,
              **kwargs: Any) -> TallyObservation:
        self._state = TallyState(episode_id=episode_id or str(uuid4()), step_count=0, total=start)
        return TallyObservation(total=start, note=f"reach {GOAL}", reward=None)

    def step(self, action: TallyAction) -> TallyObservation:  # type: ignore[override]
        if action.delta < 0:
            self._state.refused += 1
            raise ValueError("negative delta not allowed")
        self._state.step_count += 1
        self._state.total += action.delta
        done = self._state.total >= GOAL
        return TallyObservation(total=self._state.total, note="done" if done else "go on", reward=float(action.delta),
                                done=done, metadata={"step": self._state.step_count})

    @property
    def state(self) -> TallyState:
        return self._state

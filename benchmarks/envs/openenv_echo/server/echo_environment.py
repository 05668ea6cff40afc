"""OpenEnv's template environment: it echoes the message; longer messages pay more (up to 1.0). Sync methods,
as the template writes them."""

from typing import Any
from uuid import uuid4

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import State

try:
    from ..models import EchoAction, EchoObservation
except ImportError:
    from models import EchoAction, EchoObservation


class EchoEnvironment(Environment):
    SUPPORTS_CONCURRENT_SESSIONS: bool = True

    def __init__(self) -> None:
        self._state = State(episode_id=str(uuid4()), step_count=0)

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> EchoObservation:
        self._state = State(episode_id=episode_id or str(uuid4()), step_count=0)
        return EchoObservation(echoed_message="Echo environment ready!", reward=0.0)

    def step(self, action: EchoAction) -> EchoObservation:  # type: ignore[override]
        self._state.step_count += 1
        return EchoObservation(echoed_message=action.message, message_length=len(action.message),
                               reward=min(len(action.message) * 0.1, 1.0),
                               metadata={"step": self._state.step_count})

    @property
    def state(self) -> State:
        return self._state

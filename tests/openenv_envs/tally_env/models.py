"""The tally environment's action, observation and state."""

from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field


class TallyAction(Action):
    delta: int = Field(..., description="What to add to the total (negative deltas are refused by the environment)")


class TallyObservation(Observation):
    total: int = Field(default=0, description="The total so far")
    note: str = Field(default="", description="What happened")


class TallyState(State):
    total: int = 0
    refused: int = 0  # negative deltas seen

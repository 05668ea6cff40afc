"""The guess environment's observation and state (its actions are OpenEnv's MCP actions)."""

from openenv.core.env_server.types import Observation, State


class GuessObservation(Observation):
    text: str = ""


class GuessState(State):
    low: int = 1
    high: int = 100
    guesses: int = 0

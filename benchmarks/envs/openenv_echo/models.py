"""The echo environment's action and observation, as OpenEnv's template declares them."""

from openenv.core.env_server.types import Action, Observation
from pydantic import Field


class EchoAction(Action):
    message: str = Field(..., description="Message to echo back")


class EchoObservation(Observation):
    echoed_message: str = ""
    message_length: int = 0

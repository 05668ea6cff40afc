"""The quiz environment's action and observation."""

from openenv.core.env_server.types import Action, Observation
from pydantic import Field


class QuizAction(Action):
    answer: str = Field(..., description="The answer to the question")


class QuizObservation(Observation):
    question: str = Field(default="", description="The question asked")
    dataset: str = Field(default="", description="The dataset it comes from")

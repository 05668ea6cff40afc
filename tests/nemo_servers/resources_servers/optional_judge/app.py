"""A generic base of answer-checking servers, as aviary's AviaryResourcesServer[Env, Dataset] is one: the server
its config runs (judge_app.py) derives from it with its type argument."""

from typing import Generic, TypeVar

from nemo_gym.base_resources_server import SimpleResourcesServer

TAnswer = TypeVar("TAnswer")


class AnswerServer(SimpleResourcesServer, Generic[TAnswer]):
    def normalized(self, answer: TAnswer) -> str:
        return str(answer).strip()

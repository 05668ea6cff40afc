"""An answer matched exactly, or judged by a model server where its config turns the judge on (off by default, as
math_with_judge's `should_use_judge`). Its config runs judge_app.py rather than app.py, and links no dataset: its
examples are data/example.jsonl, as NeMo Gym's convention has them; its dependencies are its pyproject.toml's (no
requirements.txt), a config value is an environment variable's with a default (`${oc.env:NAME,default}`), and its
class derives from a generic base of its package's (app.py).
Written to NeMo Gym's rules."""

from nemo_gym.base_resources_server import BaseResourcesServerConfig, BaseVerifyRequest, BaseVerifyResponse
from nemo_gym.config_types import ModelServerRef
from resources_servers.optional_judge.app import AnswerServer


class OptionalJudgeConfig(BaseResourcesServerConfig):
    judge_model_server: ModelServerRef
    should_use_judge: bool = False
    max_answer_chars: int  # the longest answer it reads


class OptionalJudgeVerifyRequest(BaseVerifyRequest):
    expected_answer: str


class OptionalJudgeServer(AnswerServer[str]):
    config: OptionalJudgeConfig

    async def verify(self, body: OptionalJudgeVerifyRequest) -> BaseVerifyResponse:
        said = "".join(part.text for item in body.response.output if item.type == "message"
                       for part in item.content if part.type == "output_text")
        if self.config.should_use_judge:
            raise RuntimeError("the judge is not reachable in these tests")
        said = self.normalized(said)[:self.config.max_answer_chars]
        return BaseVerifyResponse(**body.model_dump(), reward=float(said == body.expected_answer))


if __name__ == "__main__":
    OptionalJudgeServer.run_webserver()

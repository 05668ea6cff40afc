"""An answer judged by a model server of NeMo Gym's (an LLM judge named in its config): written to NeMo Gym's rules
for judged servers, to be refused where no model server can be reached."""

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from nemo_gym.config_types import ModelServerRef


class JudgedAnswerConfig(BaseResourcesServerConfig):
    judge_model_server: ModelServerRef


class JudgedAnswerVerifyRequest(BaseVerifyRequest):
    expected_answer: str


class JudgedAnswerServer(SimpleResourcesServer):
    config: JudgedAnswerConfig

    async def verify(self, body: JudgedAnswerVerifyRequest) -> BaseVerifyResponse:
        question = f"Is this answer {body.expected_answer!r}? Say yes or no."
        judged = await self.server_client.post(server_name=self.config.judge_model_server.name,
                                               url_path="/v1/responses", json={"input": question})
        verdict = await judged.json()
        return BaseVerifyResponse(**body.model_dump(), reward=float("yes" in str(verdict).lower()))


if __name__ == "__main__":
    JudgedAnswerServer.run_webserver()

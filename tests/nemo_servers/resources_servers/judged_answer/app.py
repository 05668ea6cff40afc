"""An answer judged by a model server of NeMo Gym's (an LLM judge named in its config), written to NeMo Gym's rules
for judged servers: the judge is asked in the Responses API whether the episode's last text matches the expected
answer. As xstest does, it waits for its judge's model server to answer before it serves."""

import time

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

    def setup_webserver(self):
        while self.server_client.poll_for_status(self.config.judge_model_server.name) != "success":
            time.sleep(1)
        return super().setup_webserver()

    async def verify(self, body: JudgedAnswerVerifyRequest) -> BaseVerifyResponse:
        given = body.response.output_text
        question = f"Expected answer: {body.expected_answer}\nGiven answer: {given}\nDo they match? Say yes or no."
        judged = await self.server_client.post(server_name=self.config.judge_model_server.name,
                                               url_path="/v1/responses", json={"input": question})
        verdict = (await judged.json())["output"][-1]["content"][0]["text"]
        return BaseVerifyResponse(**body.model_dump(), reward=float(verdict.strip().lower().startswith("yes")))


if __name__ == "__main__":
    JudgedAnswerServer.run_webserver()

"""A tally kept per session (NeMo Gym's cookie): seeded with a start, added to with `add`, read with `total`;
/verify rewards an episode whose tally reached the row's expected total. Written to NeMo Gym's published rules
for resource servers (a SimpleResourcesServer subclass; its routes added in setup_webserver)."""

import asyncio
import sys

from fastapi import FastAPI, Request
from limits import refusal  # a sibling module, by bare name (NeMo runs `python app.py` in this folder)
from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseSeedSessionRequest,
    BaseSeedSessionResponse,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from nemo_gym.server_utils import SESSION_ID_KEY
from pydantic import BaseModel, Field


class TallyConfig(BaseResourcesServerConfig):
    limit: int = 1000  # the largest amount one `add` takes
    startup_seconds: float = 0  # how long its startup hook takes (a preload: competitive_coding_challenges')


class TallySeed(BaseSeedSessionRequest):
    start: int = 0


class AddRequest(BaseModel):
    amount: int


class TallyVerifyRequest(BaseVerifyRequest):
    expected_total: int


class TallyVerifyResponse(BaseVerifyResponse):
    total: int
    calls: int


class TallyServer(SimpleResourcesServer):
    config: TallyConfig
    totals: dict[str, int] = Field(default_factory=dict)
    calls: dict[str, int] = Field(default_factory=dict)

    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()
        app.post("/add")(self.add)
        app.post("/total")(self.total)
        app.post("/halt")(self.halt)
        app.router.add_event_handler("startup", self.preload)
        return app

    async def preload(self) -> None:
        await asyncio.sleep(self.config.startup_seconds)

    async def seed_session(self, request: Request, body: TallySeed) -> BaseSeedSessionResponse:
        self.totals[request.session[SESSION_ID_KEY]] = body.start
        return BaseSeedSessionResponse()

    async def add(self, request: Request, body: AddRequest) -> dict:
        session = request.session[SESSION_ID_KEY]
        if body.amount < 0:  # an error its code raises: NeMo's server answers its repr
            raise ValueError("a tally only counts up")
        refused = refusal(body.amount, self.config.limit)
        if refused:
            return {"error": refused}
        self.totals[session] = self.totals.get(session, 0) + body.amount
        self.calls[session] = self.calls.get(session, 0) + 1
        return {"total": self.totals[session]}

    async def total(self, request: Request) -> dict:
        return {"total": self.totals.get(request.session[SESSION_ID_KEY], 0)}

    async def halt(self) -> dict:
        sys.exit(3)  # as code that parses the process's argv does (Hydra, on arguments it does not know)

    async def verify(self, request: Request, body: TallyVerifyRequest) -> TallyVerifyResponse:
        session = request.session[SESSION_ID_KEY]
        total, calls = self.totals.pop(session, 0), self.calls.pop(session, 0)
        return TallyVerifyResponse(**body.model_dump(), reward=float(total == body.expected_total), total=total,
                                   calls=calls)


if __name__ == "__main__":
    TallyServer.run_webserver()

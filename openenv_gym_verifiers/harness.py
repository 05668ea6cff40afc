"""The model call of a turn, in process: the request the env composed (env.py), sent to the rollout's interception
endpoint, which applies the run's model and sampling, calls the inference server and records the turn in the
trace, as it does for a harness program's requests. Verifiers allows a harness to run so, in process, as long as its
model calls go through the endpoint (`Harness.launch`)."""

from __future__ import annotations

from typing import Any

import aiohttp
import verifiers.v1 as vf
from verifiers.v1.runtimes import ProgramResult

# a model's answer takes what it takes (the episode's timeout bounds it). aiohttp (Verifiers' own interception server
# is made with it): httpx's pool polls every idle connection at each request, which cost most of a run's time here
TIMEOUT = aiohttp.ClientTimeout(total=None, connect=30.0)

# the request of each trace's next turn (by trace id), as env.py composed it: {"messages", "tools"}
requests: dict[str, dict[str, Any]] = {}
_http: aiohttp.ClientSession | None = None


class PolicyCallConfig(vf.HarnessConfig):
    pass


class PolicyCall(vf.Harness[PolicyCallConfig]):
    APPENDS_SYSTEM_PROMPT = True
    SUPPORTS_RESUME = True
    EXECUTES_CODE = False
    NEEDS_CONTAINER = False

    async def setup(self, runtime: Any) -> None:
        pass

    async def launch(self, ctx: Any, trace: Any, runtime: Any, endpoint: str, secret: str, mcp_urls: dict[str, str],
                     data: Any, tool_interception_url: str | None = None) -> ProgramResult:
        request = requests.pop(trace.id, None)
        if request is None:
            return ProgramResult(1, "", "this harness makes the model calls of openenv_gym_verifiers' env (env.py), "
                                        "which composes each request; pair another env with another harness")
        body = {"model": ctx.model, "messages": request["messages"]} | (
            {"tools": request["tools"]} if request["tools"] else {})
        try:
            async with _client().post(f"{endpoint.rstrip('/')}/chat/completions", json=body,
                                      headers={"Authorization": f"Bearer {secret}"}) as answer:
                said = await answer.text()
        except aiohttp.ClientError as exc:
            return ProgramResult(1, "", f"the model call failed: {exc!r}")
        if answer.status != 200:
            return ProgramResult(1, "", f"the model call failed ({answer.status}): {said[:2000]}")
        return ProgramResult(0, "", "")


async def close_client() -> None:
    global _http
    http, _http = _http, None
    if http is not None:
        await http.close()


def _client() -> aiohttp.ClientSession:
    global _http
    if _http is None:
        _http = aiohttp.ClientSession(timeout=TIMEOUT, connector=aiohttp.TCPConnector(limit=0))
    return _http

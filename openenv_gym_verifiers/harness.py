"""The model call of a turn, in process: the request the env composed (env.py), sent to the rollout's interception
endpoint, which applies the run's model and sampling, calls the inference server and records the turn in the
trace, as it does for a harness program's requests. Verifiers allows a harness to run so, in process, as long as its
model calls go through the endpoint (`Harness.launch`)."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import aiohttp
import verifiers.v1 as vf
from verifiers.v1.runtimes import ProgramResult

# a model's answer takes what it takes (the episode's timeout bounds it). aiohttp (Verifiers' own interception server
# is made with it): httpx's pool polls every idle connection at each request, which cost most of a run's time here
TIMEOUT = aiohttp.ClientTimeout(total=None, connect=30.0)
# a call that failed for want of the server (its connection, a 408/409/429 or 5xx) is tried again, as the openai
# package's clients try it (what Verifiers' own harnesses call the model with): twice more, after 0.5 s then 1 s
RETRIES, FIRST_DELAY, MAX_DELAY = 2, 0.5, 8.0
RETRY_COUNT_HEADER = "x-stainless-retry-count"  # (the interception replays a retried call's turn by it)

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
        url = f"{endpoint.rstrip('/')}/chat/completions"
        for attempt in range(RETRIES + 1):
            if attempt:
                await asyncio.sleep(min(FIRST_DELAY * 2 ** (attempt - 1), MAX_DELAY) * (1 - 0.25 * random.random()))
            headers = {"Authorization": f"Bearer {secret}", RETRY_COUNT_HEADER: str(attempt)}
            try:
                async with _client().post(url, json=body, headers=headers) as answer:
                    said = await answer.text()
            except aiohttp.ClientError as exc:
                failure = f"the model call failed: {exc!r}"
                continue
            if answer.status == 200:
                return ProgramResult(0, "", "")
            failure = f"the model call failed ({answer.status}): {said[:2000]}"
            if answer.status not in (408, 409, 429) and answer.status < 500:
                break
        return ProgramResult(1, "", failure)


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

"""OpenAIPolicy: a policy served by an OpenAI-compatible chat server (vLLM, SGLang, llama.cpp, ...), over httpx.

    policy = OpenAIPolicy("http://127.0.0.1:8000/v1", "Qwen/Qwen3-0.6B", max_concurrency=128)
    reply = await policy(messages, tools)       # text, tool calls, reasoning, and token ids / logprobs when served

At most `max_concurrency` requests are in flight (the connection pool is sized to match, so no hidden cap
sits below it). Refused connections, timeouts, 429 and 5xx answers are retried `max_retries` times with
exponential backoff and jitter; other answers fail at once with the server's message (ModelServerError).
"""

from __future__ import annotations

import asyncio
import os
import random
from typing import Any

import httpx
import orjson

from openenv_gym.episode.assistant import reasoning_of
from openenv_gym.errors import ModelServerError
from openenv_gym.rollout.turns import Reply, ToolCall

RETRIED_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})


def backoff(attempt: int) -> float:
    """Seconds before retry `attempt` (0-based): doubling from 0.5 s up to 8 s, times a jitter in [0.5, 1]."""
    return min(0.5 * 2**attempt, 8.0) * random.uniform(0.5, 1.0)


class OpenAIPolicy:
    def __init__(self, base_url: str, model: str, *, api_key: str | None = None, max_concurrency: int = 64,
                 max_retries: int = 3, timeout: float = 300.0, temperature: float | None = None,
                 max_tokens: int | None = None, logprobs: bool = True, token_ids: bool = True,
                 extra_body: dict[str, Any] | None = None) -> None:
        """
        base_url: the server's OpenAI API root, e.g. http://127.0.0.1:8000/v1.
        api_key: sent as a bearer token (default $OPENAI_API_KEY, if set).
        logprobs: ask for the logprob of each sampled token.
        token_ids: ask for prompt and completion token ids (vLLM's `return_token_ids`); turn off for servers
            that refuse unknown fields.
        extra_body: more fields for every request (sampling settings the server knows).
        """
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be at least 1, got {max_concurrency}")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.max_retries = max_retries
        self.body: dict[str, Any] = {"model": model, **({"temperature": temperature} if temperature is not None
                                                         else {})}
        if max_tokens is not None:
            self.body["max_tokens"] = max_tokens
        if logprobs:
            self.body["logprobs"] = True
        if token_ids:
            self.body["return_token_ids"] = True
        self.body |= extra_body or {}
        api_key = api_key or os.environ.get("OPENAI_API_KEY")
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._timeout = httpx.Timeout(timeout, connect=min(timeout, 10.0))
        self._limits = httpx.Limits(max_connections=max_concurrency, max_keepalive_connections=max_concurrency)
        self._gate = asyncio.Semaphore(max_concurrency)
        self._http: httpx.AsyncClient | None = None

    def __getstate__(self) -> dict[str, Any]:
        """A copy for another process (a Ray worker, say): it makes its own HTTP client and concurrency gate."""
        return self.__dict__ | {"_http": None, "_gate": asyncio.Semaphore(self._limits.max_connections)}

    async def __call__(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
        body = self.body | {"messages": messages} | ({"tools": tools} if tools else {})
        async with self._gate:
            data = await self._post(orjson.dumps(body))
        return reply_of(data)

    async def _post(self, content: bytes) -> dict[str, Any]:
        if self._http is None:
            self._http = httpx.AsyncClient(base_url=self.base_url, headers=self._headers, timeout=self._timeout,
                                           limits=self._limits)
        url = f"{self.base_url}/chat/completions"
        for attempt in range(self.max_retries + 1):
            last = attempt == self.max_retries
            try:
                response = await self._http.post("/chat/completions", content=content,
                                                 headers={"Content-Type": "application/json"})
            except httpx.TransportError as exc:
                if last:
                    raise ModelServerError(f"cannot reach the model server at {url} after "
                                           f"{self.max_retries + 1} attempts: {exc!r}") from None
            else:
                if response.status_code == 200:
                    return response.json()
                if last or response.status_code not in RETRIED_STATUS:
                    raise ModelServerError(f"the model server at {url} answered {response.status_code}: "
                                           f"{response.text[:500]}")
            await asyncio.sleep(backoff(attempt))
        raise AssertionError("unreachable")

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None


def reply_of(data: dict[str, Any]) -> Reply:
    """A chat completion's first choice as a Reply."""
    try:
        choice = data["choices"][0]
        message = choice["message"]
    except (KeyError, IndexError, TypeError):
        raise ModelServerError(f"the model server's answer has no choices[0].message: {str(data)[:300]}") from None
    calls = []
    for k, call in enumerate(message.get("tool_calls") or []):
        function = call.get("function") or {}
        arguments = function.get("arguments") or "{}"
        try:
            parsed = orjson.loads(arguments) if isinstance(arguments, str) else arguments
        except orjson.JSONDecodeError:
            parsed = None
        if not isinstance(parsed, dict):  # the env will answer with an invalid-action observation
            parsed = {"_unparsed": arguments}
        calls.append(ToolCall(function.get("name", ""), parsed, call.get("id") or f"call_{k}"))
    logprobs = None
    content_logprobs = (choice.get("logprobs") or {}).get("content")
    if content_logprobs:
        logprobs = [float(entry["logprob"]) for entry in content_logprobs]
    reasoning = reasoning_of(message)  # (a server with a reasoning parser: vLLM, SGLang)
    return Reply(text=message.get("content") or "", tool_calls=calls,
                 reasoning=reasoning if isinstance(reasoning, str) and reasoning else None,
                 prompt_ids=data.get("prompt_token_ids") or choice.get("prompt_token_ids"),
                 completion_ids=choice.get("token_ids"), logprobs=logprobs)

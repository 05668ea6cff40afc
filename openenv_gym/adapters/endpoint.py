"""What an adapter whose program calls a model is given by the server: the intercepting model endpoint.

`await endpoint.open(ask, model)` leases the program its own address on the worker's model endpoint
(`lease.base_url`, ending in /v1, with `lease.api_key`; `client_environ(lease)` says it the way each API's clients
read it): every model request sent there, in any API the endpoint speaks, is handed to `ask` (a ChatRequest in, the
assistant message out), and nothing sent anywhere else reaches it. `lease.close()`
ends it: a request still waiting, or sent later, is answered with an error saying the episode is over. What went
wrong between the program and the endpoint (a malformed request, another model asked for) is in `lease.errors`.
Given a `listener` (a listening socket in the program's sandbox, sandbox/netns.py), the lease's address is that
socket's. With `any_model`, a chat completions request that names another model is answered too (a Verifiers seat
pinned to a model of its own), where it is otherwise refused: the request says which (`ChatRequest.model`).
"""

from __future__ import annotations

import socket
from typing import Protocol

from openenv_gym.adapters.policy_turns import Ask


class EndpointLease(Protocol):
    base_url: str
    api_key: str
    model: str
    errors: list[str]

    def close(self) -> None: ...


def client_environ(lease: EndpointLease) -> dict[str, str]:
    """The environment variables that point each API's clients (and CLI agents) at the lease: the `openai` package
    and Codex, the `anthropic` package and Claude Code, `google-genai` and Gemini CLI."""
    root = lease.base_url.removesuffix("/v1")  # (Anthropic's and Google's clients add /v1/..., /v1beta/...)
    return {"OPENAI_BASE_URL": lease.base_url, "OPENAI_API_KEY": lease.api_key, "OPENAI_MODEL": lease.model,
            "ANTHROPIC_BASE_URL": root, "ANTHROPIC_API_KEY": lease.api_key, "ANTHROPIC_MODEL": lease.model,
            "GOOGLE_GEMINI_BASE_URL": root, "GEMINI_API_KEY": lease.api_key, "GEMINI_MODEL": lease.model}


class ModelEndpoint(Protocol):
    async def open(self, ask: Ask, model: str, listener: socket.socket | None = None,
                   any_model: bool = False) -> EndpointLease: ...

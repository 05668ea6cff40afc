"""What an adapter whose program calls a model is given by the server: the intercepting model endpoint.

`await endpoint.open(ask, model)` leases the program its own address on the worker's OpenAI-compatible endpoint
(`lease.base_url`, ending in /v1, with `lease.api_key`): every chat completion request sent there is handed to
`ask` (a ChatRequest in, the assistant message out), and nothing sent anywhere else reaches it. `lease.close()`
ends it: a request still waiting, or sent later, is answered with an error saying the episode is over. What went
wrong between the program and the endpoint (a malformed request, another model asked for) is in `lease.errors`.
Given a `listener` (a listening socket in the program's sandbox, sandbox/netns.py), the lease's address is that
socket's.
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


class ModelEndpoint(Protocol):
    async def open(self, ask: Ask, model: str, listener: socket.socket | None = None) -> EndpointLease: ...

"""The transports by name, as the Gymnasium ids name them: "native" (openenv_gym servers), "ors" (ORS HTTP+SSE
servers), "openenv" (OpenEnv servers' /ws), "auto" (whichever of these the server speaks: openenv/remote).
Loaded on first use, so a native client never imports httpx. A new wire format adds a line here."""

from __future__ import annotations

import importlib

from openenv_gym.client.transport import Transport

TRANSPORTS = {"native": "openenv_gym.client.native.transport:NativeTransport",
              "ors": "openenv_gym.client.ors:OrsTransport",
              "openenv": "openenv_gym.client.openenv:OpenEnvTransport",
              "auto": "openenv_gym.client.probe:ProbedTransport"}


def transport_class(name: str) -> type[Transport]:
    where = TRANSPORTS.get(name)
    if where is None:
        raise ValueError(f"unknown transport {name!r}; known transports: {', '.join(TRANSPORTS)}")
    module, attribute = where.split(":")
    return getattr(importlib.import_module(module), attribute)

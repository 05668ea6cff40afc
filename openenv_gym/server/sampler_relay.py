"""The WebSocket `/sampler` of a worker: the calls of rollout workers to the server's one task sampler
(sampling/shared.py is their client), relayed to the process that holds it (sampling/host.py) over its Unix socket,
one JSON message each way. The token guards it as it guards every WebSocket.

    {"call": "sample", "n": 64}                                   -> {"result": [{"split": ..., "index": ...}, ...]}
    {"call": "update", "task": {...}, "rewards": [...], "costs": null}  -> {"result": null}
    {"call": "describe" | "metrics" | "state"}                    -> {"result": {...}}
    {"call": "note", "what": "dropped" | "short"}                 -> {"result": null}
    anything else                                                 -> {"error": {"code": "bad_request", ...}}
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import orjson
from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

from openenv_gym.errors import BadRequestError
from openenv_gym.server.catalog import Catalog

SAMPLER_PATH = "/sampler"

CLIENT_CALLS = frozenset({"describe", "sample", "update", "note", "metrics", "state"})
MAX_ANSWER_BYTES = 64 * 2**20  # a sample of many tasks, or the state of a large catalog


class SamplerRelay:
    def __init__(self, path: str) -> None:
        self.path = path
        self.lock = asyncio.Lock()  # one request at a time on the socket: answers come back in order
        self.streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def start(self, catalog: Catalog) -> None:
        """Give the host this worker's splits (the first worker's make the sampler, over their tasks)."""
        await self.call({"call": "init", "splits": await catalog.splits(), "env": catalog.name})

    async def call(self, request: dict[str, Any]) -> Any:
        async with self.lock:
            if self.streams is None:
                self.streams = await asyncio.open_unix_connection(self.path, limit=MAX_ANSWER_BYTES)
            reader, writer = self.streams
            try:
                writer.write(orjson.dumps(request) + b"\n")
                answer = orjson.loads(await reader.readline())
            except (OSError, ValueError):
                self.streams = None
                writer.close()
                raise
        if "error" in answer:
            raise BadRequestError(answer["error"]["message"])
        return answer["result"]

    async def serve(self, connection: ServerConnection) -> None:
        """One rollout worker's calls, answered in order until it goes."""
        with contextlib.suppress(ConnectionClosed):
            async for message in connection:
                await connection.send(orjson.dumps(await self.answer(message)).decode())

    async def answer(self, message: str | bytes) -> dict[str, Any]:
        try:
            request = orjson.loads(message)
            if not isinstance(request, dict) or request.get("call") not in CLIENT_CALLS:
                raise BadRequestError(f"send a JSON object whose call is one of {', '.join(sorted(CLIENT_CALLS))}")
            return {"result": await self.call(request)}
        except orjson.JSONDecodeError as exc:
            return {"error": BadRequestError(f"send one JSON object per message ({exc})").to_wire()}
        except BadRequestError as exc:
            return {"error": exc.to_wire()}
        except (OSError, ValueError) as exc:
            return {"error": {"code": "unavailable", "message": f"the server's sampler does not answer: {exc}"}}

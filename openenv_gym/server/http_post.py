"""HTTP requests with a body (OpenEnv's `POST /mcp`) on the WebSocket port.

websockets answers only bodiless requests (its handshake); a connection that starts with `POST` is taken over
here, parsed with h11, handed to the route, answered, and closed. Everything else goes on to websockets
untouched. Bodies are bounded, and so is the time a request may take to arrive.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from typing import Any

import h11
import orjson
from websockets.asyncio.server import ServerConnection

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 4 * 2**20
REQUEST_TIMEOUT = 10.0  # seconds a POST request may take to arrive whole
# (the JSON body, the request's headers as (lower-case name, value) pairs) -> (status, JSON answer or None)
PostRoute = Callable[[Any, list[tuple[str, str]]], Awaitable[tuple[int, Any]]]


class PostAwareConnection(ServerConnection):
    """A websockets server connection that answers POST requests through `routes` (set on the class by
    `with_routes`) instead of failing their handshake."""

    routes: dict[str, PostRoute] = {}
    _checked = False
    _http: h11.Connection | None = None

    @classmethod
    def with_routes(cls, routes: dict[str, PostRoute]) -> type[PostAwareConnection]:
        return type("PostAwareConnection", (cls,), {"routes": routes})

    def data_received(self, data: bytes) -> None:
        # (one method that routes by state: uvloop keeps the bound method it was first given)
        if self._http is not None:  # the rest of a POST request
            self._more(data)
            return
        if self._checked or not data.startswith(b"POST "):
            self._checked = True
            super().data_received(data)
            return
        self._checked = True
        self._http = h11.Connection(h11.SERVER, max_incomplete_event_size=64 * 1024)
        self._arrived = asyncio.Event()
        self._more(data)
        asyncio.get_running_loop().create_task(self._answer())

    def _more(self, data: bytes) -> None:
        assert self._http is not None
        self._http.receive_data(data)
        self._arrived.set()

    async def _next(self) -> Any:
        assert self._http is not None
        while True:
            event = self._http.next_event()
            if event is not h11.NEED_DATA:
                return event
            self._arrived.clear()
            await self._arrived.wait()

    async def _answer(self) -> None:
        try:
            async with asyncio.timeout(REQUEST_TIMEOUT):
                request, body = await self._next(), b""
                while not isinstance(event := await self._next(), h11.EndOfMessage):
                    if isinstance(event, h11.Data):
                        body += event.data
                        if len(body) > MAX_BODY_BYTES:
                            raise ValueError(f"the body is over {MAX_BODY_BYTES // 2**20} MiB")
            status, answer = await self._route(request, body)
        except (h11.RemoteProtocolError, ValueError, TimeoutError) as exc:
            status, answer = HTTPStatus.BAD_REQUEST, {"error": {"code": "bad_request", "message": str(exc)}}
        except Exception:
            log.exception("answering a POST request failed")
            status, answer = HTTPStatus.INTERNAL_SERVER_ERROR, {"error": {"code": "internal", "message": "failed"}}
        self._reply(status, answer)

    async def _route(self, request: h11.Request, body: bytes) -> tuple[int, Any]:
        path = request.target.decode("ascii", "replace").partition("?")[0]
        route = self.routes.get(path)
        if route is None:
            return HTTPStatus.NOT_FOUND, {"error": {"code": "not_found", "message": f"no POST route {path}"}}
        try:
            payload = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            payload = NotJson(str(exc))
        headers = [(name.decode().lower(), value.decode("latin-1")) for name, value in request.headers]
        return await route(payload, headers)

    def _reply(self, status: int, answer: Any) -> None:
        assert self._http is not None
        body = b"" if answer is None else orjson.dumps(answer)
        try:
            data = self._http.send(h11.Response(status_code=int(status), headers=[
                ("content-type", "application/json"), ("content-length", str(len(body))),
                ("connection", "close")]))
            data += self._http.send(h11.Data(data=body)) + self._http.send(h11.EndOfMessage())
        except h11.LocalProtocolError:  # the request was too broken to answer in kind
            data = b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
        self.transport.write(data)
        self.transport.close()


class NotJson:
    """A body that is not JSON (its routes answer with their own error)."""

    def __init__(self, reason: str) -> None:
        self.reason = reason

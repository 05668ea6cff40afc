"""Plain HTTP GET on the WebSocket port: /healthz, /info, and the bearer-token check."""

from __future__ import annotations

import hmac
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

import orjson
from websockets.asyncio.server import ServerConnection
from websockets.http11 import Request, Response

from openenv_gym.errors import UnauthorizedError

WEBSOCKET_PATHS = ("/", "/v1")


def json_response(connection: ServerConnection, status: HTTPStatus, body: Any) -> Response:
    response = connection.respond(status, orjson.dumps(body).decode())
    del response.headers["Content-Type"]
    response.headers["Content-Type"] = "application/json"
    return response


def bearer_matches(request: Request, token: str) -> bool:
    supplied = request.headers.get("Authorization", "")
    return hmac.compare_digest(supplied.encode(), f"Bearer {token}".encode())


def make_process_request(token: str | None, health: Callable[[], dict], info: Callable[[], dict]):
    """The websockets `process_request` hook: answer GET routes, refuse missing tokens."""

    def process_request(connection: ServerConnection, request: Request) -> Response | None:
        path = request.path.split("?", 1)[0]
        if path == "/healthz":  # open even with a token, for liveness probes
            return json_response(connection, HTTPStatus.OK, health())
        if token is not None and not bearer_matches(request, token):
            error = UnauthorizedError("this server needs 'Authorization: Bearer <token>'; pass token=... "
                                      "to connect()/gym.make() or set OPENENV_GYM_TOKEN")
            return json_response(connection, HTTPStatus.UNAUTHORIZED, {"error": error.to_wire()})
        if path == "/info":
            return json_response(connection, HTTPStatus.OK, info())
        if path in WEBSOCKET_PATHS and request.headers.get("Upgrade", "").lower() == "websocket":
            return None  # go on with the WebSocket handshake
        return json_response(connection, HTTPStatus.NOT_FOUND, {"error": {
            "code": "not_found", "message": f"no route {path}; try /healthz, /info, or a WebSocket on /"}})

    return process_request

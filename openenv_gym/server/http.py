"""The plain HTTP front end, on the WebSocket port: GET /healthz, /info, /metrics, /splits, /tasks (and OpenEnv's
/health, /schema and /metadata), and the bearer token.

A websockets `process_request` hook: it answers these routes itself and lets WebSocket upgrades on the
protocol paths through to the WebSocket front ends.
"""

from __future__ import annotations

import base64
import binascii
import hmac
from collections.abc import Callable, Sequence
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qs

import orjson
from websockets.asyncio.server import ServerConnection
from websockets.http11 import Request, Response

from openenv_gym.errors import BadRequestError, ProtocolError, UnauthorizedError
from openenv_gym.server.catalog import Catalog

WEBSOCKET_PATHS = ("/", "/v1", "/ws")  # the native protocol; OpenEnv's on /ws


def json_response(connection: ServerConnection, status: HTTPStatus, body: Any) -> Response:
    response = connection.respond(status, orjson.dumps(body).decode())
    del response.headers["Content-Type"]
    response.headers["Content-Type"] = "application/json"
    return response


BROWSER_SUBPROTOCOL = "openenv-gym"  # what the playground asks for; it carries the token in a second one:
TOKEN_SUBPROTOCOL = "openenv-gym.bearer."  # + the token, base64url without padding (browsers set no headers)


def bearer_refusal(request: Request, token: str) -> str | None:
    """Why the request's credentials are refused, or None when they carry the token: in the Authorization
    header, or, from a browser's WebSocket (which cannot set headers), in a subprotocol."""
    offered = [p.strip() for value in request.headers.get_all("Sec-WebSocket-Protocol") for p in value.split(",")]
    for protocol in offered:
        if protocol.startswith(TOKEN_SUBPROTOCOL):
            encoded = protocol.removeprefix(TOKEN_SUBPROTOCOL)
            try:
                supplied = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))
            except (ValueError, binascii.Error):
                supplied = b""
            if hmac.compare_digest(supplied, token.encode()):
                return None
            return "the token in the WebSocket subprotocol is not this server's"
    return authorization_refusal(request.headers.get_all("Authorization"), token)


def select_subprotocol(connection: ServerConnection, offered: Sequence[str]) -> str | None:
    """The playground's subprotocol when a browser offers it; no subprotocol for every other client."""
    return BROWSER_SUBPROTOCOL if BROWSER_SUBPROTOCOL in offered else None


def authorization_refusal(supplied: list[str], token: str) -> str | None:
    """Why these Authorization header values are refused, or None when they carry the token. The scheme is
    case-insensitive (RFC 7235); the token is compared in constant time."""
    if len(supplied) > 1:
        return "send one Authorization header, not several"
    scheme, _, credentials = (supplied[0] if supplied else "").strip().partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(credentials.strip().encode(), token.encode()):
        return ("this server needs 'Authorization: Bearer <token>'; pass token=... to connect()/gym.make() or "
                "set OPENENV_GYM_TOKEN")
    return None


def _int_param(query: dict[str, list[str]], name: str) -> int | None:
    values = query.get(name)
    if not values:
        return None
    try:
        return int(values[0])
    except ValueError:
        raise BadRequestError(f"query parameter {name} must be an integer, got {values[0]!r}") from None


Route = Callable[[], dict]


Page = tuple[str | Callable[[], str], str]  # (its body, or what makes it at each request; its content type)


def make_process_request(token: str | None, open_routes: dict[str, Route], routes: dict[str, Route],
                         catalog: Catalog, pages: dict[str, Page] | None = None,
                         sockets: tuple[str, ...] = WEBSOCKET_PATHS):
    """The websockets `process_request` hook: answer GET routes (`open_routes` and the `pages`, {path: Page},
    even without the token: they hold nothing the token guards), refuse missing tokens, and let WebSocket upgrades
    on the `sockets` paths through."""

    async def catalog_response(connection: ServerConnection, path: str, query: dict[str, list[str]]) -> Response:
        try:
            if path == "/splits":
                return json_response(connection, HTTPStatus.OK, {"splits": await catalog.splits()})
            split = query.get("split", [None])[0]
            listing = await catalog.tasks(split, _int_param(query, "start"), _int_param(query, "stop"))
            return json_response(connection, HTTPStatus.OK, listing)
        except ProtocolError as exc:
            return json_response(connection, HTTPStatus.BAD_REQUEST, {"error": exc.to_wire()})

    async def process_request(connection: ServerConnection, request: Request) -> Response | None:
        path, _, query_string = request.path.partition("?")
        if path in open_routes:  # health checks: open even with a token, for liveness probes
            return json_response(connection, HTTPStatus.OK, open_routes[path]())
        if pages and path in pages:
            body, kind = pages[path]
            response = connection.respond(HTTPStatus.OK, body if type(body) is str else body())
            del response.headers["Content-Type"]
            response.headers["Content-Type"] = kind
            return response
        refusal = None if token is None else bearer_refusal(request, token)
        if refusal is not None:
            return json_response(connection, HTTPStatus.UNAUTHORIZED, {"error": UnauthorizedError(refusal).to_wire()})
        if path in routes:
            return json_response(connection, HTTPStatus.OK, routes[path]())
        if path in ("/splits", "/tasks"):
            return await catalog_response(connection, path, parse_qs(query_string))
        if path in sockets and request.headers.get("Upgrade", "").lower() == "websocket":
            return None  # go on with the WebSocket handshake
        return json_response(connection, HTTPStatus.NOT_FOUND, {"error": {
            "code": "not_found",
            "message": f"no route {path}; try /healthz, /info, /metrics, /splits, /tasks?split=..., or a WebSocket "
                       "on / (OpenEnv's: /health, /schema, /metadata, and a WebSocket on /ws)"}})

    return process_request

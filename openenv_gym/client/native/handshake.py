"""Opening a native connection: the URL, the bearer token, and what a refused handshake means.

    conn = await openenv_gym.connect("ws://127.0.0.1:8000")          # or: async with ... as conn
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
from functools import partial

import orjson
from websockets.asyncio.client import ClientConnection
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import InvalidHandshake, InvalidStatus, InvalidURI

from openenv_gym.client.native.connection import Connection
from openenv_gym.client.transport import DEFAULT_REQUEST_TIMEOUT
from openenv_gym.errors import ConnectionLostError, ServerRefusedError, ServerUnreachableError, UnauthorizedError
from openenv_gym.protocol import native as p


def websocket_url(url: str) -> str:
    """Accept ws://, wss://, http:// and https:// server URLs."""
    for http, ws in (("http://", "ws://"), ("https://", "wss://")):
        if url.startswith(http):
            return ws + url[len(http):]
    return url


def auth_headers(token: str | None) -> dict[str, str]:
    token = token if token is not None else os.environ.get("OPENENV_GYM_TOKEN")
    return {"Authorization": f"Bearer {token}"} if token else {}


def _handshake_error(url: str, exc: InvalidStatus) -> Exception:
    response = exc.response
    try:
        error = orjson.loads(response.body)["error"]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        error = None
    if response.status_code == 401:
        return UnauthorizedError(error["message"] if error else f"{url} refused the connection: 401")
    return ServerUnreachableError(f"{url} refused the WebSocket handshake with HTTP {response.status_code}"
                                  + (f": {error['message']}" if error else ""))


async def _open_socket(url: str, token: str | None, open_timeout: float) -> ClientConnection:
    """A WebSocket to an openenv_gym server, or the typed error that says why not."""
    try:
        return await ws_connect(
            url, additional_headers=auth_headers(token), compression=None, open_timeout=open_timeout,
            ping_interval=None, max_size=None, max_queue=64, proxy=None)
    except InvalidStatus as exc:
        raise _handshake_error(url, exc) from None
    except InvalidURI as exc:
        raise ServerUnreachableError(f"{url!r} is not a WebSocket URL ({exc}); use ws://host:port") from None
    except (OSError, TimeoutError, InvalidHandshake) as exc:  # InvalidHandshake: say, closed mid-handshake
        unreachable = ServerRefusedError if _refused(exc) else ServerUnreachableError
        raise unreachable(
            f"cannot connect to {url}: {exc}; is the server running? start one with "
            "`openenv-gym serve ENV --port PORT`") from None


def _refused(exc: BaseException) -> bool:
    """Whether every address of the server refused the connection (asyncio folds the errors of a name with
    several addresses into one OSError whose message lists them)."""
    if isinstance(exc, ConnectionRefusedError):
        return True
    message = str(exc)
    return (isinstance(exc, OSError) and message.startswith("Multiple exceptions: ")
            and message.count("[Errno") == message.count(f"[Errno {errno.ECONNREFUSED}]"))


class _Connecting:
    """What `connect()` returns: await it, or use it as `async with`."""

    def __init__(self, url: str, kwargs: dict) -> None:
        self.url = url
        self.kwargs = kwargs
        self.connection: Connection | None = None

    def __await__(self):
        return self._open().__await__()

    async def _open(self) -> Connection:
        url = websocket_url(self.url)
        reopen = partial(_open_socket, url, self.kwargs.get("token"), self.kwargs.get("open_timeout", 10.0))
        self.connection = Connection(
            await reopen(), url, self.kwargs.get("request_timeout", DEFAULT_REQUEST_TIMEOUT),
            self.kwargs.get("max_frame_bytes", p.DEFAULT_MAX_FRAME_BYTES), reopen=reopen)
        asking = [self.connection.use_columns()] if self.kwargs.get("columns", True) else []
        if self.kwargs.get("resume", True):
            asking.append(self.connection.make_resumable())
        # in one frame; best effort: a server that goes away as we connect shows it at the connection's first use
        with contextlib.suppress(ConnectionLostError):
            await asyncio.gather(*asking)
        return self.connection

    async def __aenter__(self) -> Connection:
        return await self._open()

    async def __aexit__(self, *exc: object) -> None:
        if self.connection is not None:
            await self.connection.close()


def connect(url: str, *, token: str | None = None, open_timeout: float = 10.0,
            request_timeout: float | None = DEFAULT_REQUEST_TIMEOUT,
            max_frame_bytes: int = p.DEFAULT_MAX_FRAME_BYTES, resume: bool = True, columns: bool = True) -> _Connecting:
    """Open a connection to an openenv_gym server: `async with connect(url) as conn:` or `await`.

    token: sent as `Authorization: Bearer <token>` (default: $OPENENV_GYM_TOKEN).
    request_timeout: seconds to wait for any one answer (None waits forever).
    resume: when the socket drops, reconnect and resume the sessions (within the server's resume window),
    sending again what was not answered; each request is applied once.
    columns: have the server send the plain answers of a frame in columns (servers of protocol 3 on); off, one
    message per answer, as older servers send them.
    """
    return _Connecting(url, {"token": token, "open_timeout": open_timeout, "request_timeout": request_timeout,
                             "max_frame_bytes": max_frame_bytes, "resume": resume, "columns": columns})

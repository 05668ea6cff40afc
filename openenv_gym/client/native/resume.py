"""How a native connection outlives its socket: the reader loop, and on a drop, reconnecting with backoff,
resuming the sessions with the server's token and sending again what was not answered (the server applies each
request once). Only past the resume window, or when the server lost the sessions, do the waiting requests fail.

Resuming is for a socket that dropped while its server lives on and holds the sessions (a flaky network, a
proxy that cut it). A server that refuses the reconnection, or that no longer knows the token, has lost them:
the waiting requests fail at once, not after the window."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed

from openenv_gym.client.native.batches import Batch
from openenv_gym.client.native.deadlines import Deadlines
from openenv_gym.errors import (
    ConnectionLostError,
    OpenEnvGymError,
    ServerRefusedError,
    UnauthorizedError,
    UnknownOpError,
)
from openenv_gym.protocol import answers as answers_protocol
from openenv_gym.protocol import native as p
from openenv_gym.protocol.outbox import Outbox
from openenv_gym.runtime.eager import EagerStarter

log = logging.getLogger(__name__)

ReopenSocket = Callable[[], Awaitable[ClientConnection]]
ServerGone = Callable[[], Awaitable[bool]]  # whether the server is gone for good (see Resuming.server_gone)
RESUME_BACKOFF = (0.05, 2.0)  # seconds between reconnection attempts: the first, and the most


class Resuming:
    """The reading and resuming half of Connection (which sets these attributes and the methods used below)."""

    url: str
    request_timeout: float | None
    resume: dict[str, Any] | None  # the server's resumable answer: token, window, worker(s)
    resumed: int  # how many times the socket dropped and the sessions were resumed
    columns: bool  # the connection asked for answers in columns: each new socket asks again
    # Asked when a reconnection fails: True ends the resume at once (the source of the servers no longer lists this
    # one: a Ray actor that was replaced, a pod that was deleted), rather than after the whole window.
    server_gone: ServerGone | None = None
    _ws: ClientConnection
    _reopen: ReopenSocket | None
    _loop: asyncio.AbstractEventLoop
    _pending: dict[int, asyncio.Future]
    _deadlines: Deadlines | None
    _messages: dict[int, dict] | None
    _batches: dict[int, Batch]
    _starts: list[int]
    _outbox: Outbox
    _eager: EagerStarter
    _closed_reason: str | None
    _closing: bool
    _route: Callable[[list[dict]], None]  # where the answers of a frame go (routing.py)

    async def request(self, message: dict) -> dict:
        raise NotImplementedError

    def next_id(self) -> int:
        raise NotImplementedError

    async def make_resumable(self) -> None:
        """Ask the server to keep this connection's sessions through a drop (a no-op on servers that do not)."""
        try:
            answer = await self.request(p.resumable_request(self.next_id()))
        except UnknownOpError:
            return
        if answer.get("token") and answer.get("window", 0) > 0:
            self.resume = answer
            if self._messages is None:
                self._messages = {rid: {} for rid in self._pending}  # (nothing to send again for these)

    async def _read(self) -> None:
        reason = "the server closed the connection"
        try:
            while True:
                reason, resumable = await self._read_socket()
                if not resumable or self._closing or self.resume is None or self._reopen is None:
                    break
                try:
                    given_up = await self._resume(reason)
                except Exception:
                    log.exception("resuming the connection to %s failed", self.url)
                    given_up = "resuming it failed"
                if given_up is not None:
                    reason += f"; {given_up}"
                    break
        finally:
            self._closed_reason = reason
            self._outbox.closed = True
            self._eager.close()
            self._fail_waiting(reason)
            if self._deadlines is not None:
                self._deadlines.cancel()

    async def _read_socket(self) -> tuple[str, bool]:
        """Route the answers of the current socket until it closes: (why, whether a resume may help)."""
        try:
            async for frame in self._ws:
                self._route(orjson.loads(frame))
        except ConnectionClosed:
            pass
        except Exception as exc:  # a frame we cannot read: nothing after it can be trusted
            log.exception("reading from %s failed", self.url)
            await self._ws.close()
            return f"unreadable frame from the server ({exc})", False
        close = self._ws.protocol.close_rcvd
        if close is None:
            return "the connection dropped", True
        # A close frame from the server ends its sessions (a server stopping sends 1001): resuming cannot help,
        # and waiting out the window would stall every request on it. Only a drop is resumed.
        return f"the server closed the connection ({close})", False

    def _fail_waiting(self, reason: str) -> None:
        """Every request waiting for an answer fails: its session is gone."""
        lost = ConnectionLostError(f"{reason}; the sessions of this connection are gone")
        batches, self._batches, self._starts = list(self._batches.values()), {}, []
        for batch in batches:
            batch.fail_unanswered(lost)
        pending, self._pending = self._pending, {}
        if self._messages is not None:
            self._messages = {}
        for future in pending.values():
            if not future.done():
                future.set_exception(ConnectionLostError(
                    f"{reason} while this request waited for its answer; its session is gone, reset to start "
                    "a new one"))

    async def _resume(self, reason: str) -> str | None:
        """Reconnect and resume; None when reading goes on (resumed, or on a fresh socket whose sessions were
        lost), else why it was given up (the server stayed out of reach for the whole window, or is gone)."""
        assert self.resume is not None and self._reopen is not None
        window = self.resume["window"]
        out_of_reach = f"it could not be resumed within {window:g} s"
        deadline = self._loop.time() + window
        delay, wrong_worker = RESUME_BACKOFF[0], 0
        # The source of the servers, asked whether this one is gone: in the background, as it may take seconds (a
        # Ray handle waits for restarting actors), while reconnecting goes on (a dying server refuses soon after).
        asking: asyncio.Future[bool] | None = None

        async def back_off() -> None:
            nonlocal delay
            await asyncio.sleep(min(delay, max(0.0, deadline - self._loop.time())))
            delay = min(2 * delay, RESUME_BACKOFF[1])

        try:
            while not self._closing and self._loop.time() < deadline:
                try:
                    ws = await self._reopen()
                except UnauthorizedError:
                    return out_of_reach
                except ServerRefusedError:  # nothing listens there any more: the sessions died with the process
                    return "the server refused the reconnection (its process is gone, and its sessions with it)"
                except (OSError, TimeoutError, OpenEnvGymError):
                    if asking is not None and asking.done():
                        if asking.result():
                            return "the server is gone (its source no longer lists it)"
                        asking = None
                    if asking is None and self.server_gone is not None:
                        asking = asyncio.ensure_future(self.server_gone())
                    await back_off()
                    continue
                if self._closing:
                    await ws.close()
                    return out_of_reach
                also = [answers_protocol.columns_request(self.next_id())] if self.columns else []  # per socket
                try:
                    answer = await self._ask(ws, p.resume_request(self.next_id(), self.resume["token"]), also)
                except (ConnectionClosed, OSError, TimeoutError):
                    await ws.close()
                    await back_off()
                    continue
                if "error" in answer:  # the server no longer holds the sessions (its worker restarted, say)
                    self._fresh_socket(ws, f"{reason}, and {answer['error']['message']}")
                    return None
                if answer.get("resumed"):
                    self._ws = ws
                    self.resumed += 1
                    self._send_again()
                    return None
                wrong_worker += 1  # the kernel gave this socket to another worker process: connect again
                if wrong_worker > 8 * self.resume.get("workers", 1) + 8:  # that worker never came back
                    self._fresh_socket(ws, f"{reason}, and its worker process did not come back")
                    return None
                await ws.close()
            return out_of_reach
        finally:
            if asking is not None:
                asking.cancel()

    async def _ask(self, ws: ClientConnection, request: dict, also: list[dict]) -> dict:
        """One request on a socket of our own, before it carries anything else (with `also` in its frame, whose
        answers are not awaited)."""
        await ws.send(orjson.dumps([request, *also]).decode())
        async with asyncio.timeout(self.request_timeout):
            while True:
                for answer in orjson.loads(await ws.recv()):
                    if answer.get("id") == request["id"]:
                        return answer

    def _fresh_socket(self, ws: ClientConnection, reason: str) -> None:
        """Go on over a new socket whose server lost the sessions: what waited fails, new sessions work."""
        self._ws = ws
        self.resume = None
        self._fail_waiting(reason)
        self._loop.create_task(self._make_resumable_again())

    async def _make_resumable_again(self) -> None:
        with contextlib.suppress(OpenEnvGymError):  # dropped again before it could: the reader says so
            await self.make_resumable()

    def _send_again(self) -> None:
        """After a resume, every request not answered yet, marked as sent again (the server applies it once)."""
        again = [message for message in (self._messages or {}).values() if message]
        for batch in self._batches.values():
            again += batch.unanswered()
        again.sort(key=lambda message: message["id"])
        self._outbox.put_many([message | {"resent": True} for message in again])

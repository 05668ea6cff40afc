"""The native client: one multiplexed WebSocket connection carrying many sessions (opened by handshake.py).

    async with openenv_gym.connect("ws://127.0.0.1:8000") as conn:
        session = conn.session()
        obs, info = await session.reset(seed=0)
        obs, reward, terminated, truncated, info = await session.step("hello")
        await session.close()

Requests carry ids, so any number of them may be in flight; requests made in the same event-loop
iteration (say, `asyncio.gather` over many sessions) leave as one batch frame.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from bisect import bisect_left, bisect_right, insort
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import orjson
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed
from websockets.protocol import State

from openenv_gym.client.transport import StepTuple, TransportSession
from openenv_gym.episode.results import Action
from openenv_gym.episode.state import Episode, ends_session
from openenv_gym.errors import (
    ConnectionLostError,
    InvalidActionError,
    OpenEnvGymError,
    RequestTimeoutError,
    UnauthorizedError,
    UnknownOpError,
    UnknownSessionError,
    error_from_wire,
)
from openenv_gym.protocol import native as p
from openenv_gym.protocol.outbox import Outbox
from openenv_gym.runtime.eager import start_eagerly

log = logging.getLogger(__name__)


class BatchSink(Protocol):
    """Receives the answers to a block of requests sent with `Connection.submit_batch`."""

    def answer(self, offsets: list[int], answers: list[dict] | list[Exception]) -> None:
        """Answers (or errors) for the requests at these offsets of the block."""


class _Batch:
    """Requests with ids start..stop-1, answered into one sink (no future or dict entry per request)."""

    __slots__ = ("answered", "messages", "remaining", "sink", "start", "stop")

    def __init__(self, start: int, messages: list[dict], sink: BatchSink) -> None:
        self.start, self.stop, self.sink, self.messages = start, start + len(messages), sink, messages
        self.answered = bytearray(len(messages))
        self.remaining = len(messages)

    def unanswered(self) -> list[dict]:
        return [message for message, done in zip(self.messages, self.answered, strict=True) if not done]

    def fail_unanswered(self, error: Exception) -> None:
        offsets = [offset for offset, done in enumerate(self.answered) if not done]
        if offsets:
            self.sink.answer(offsets, [error] * len(offsets))


def _log_send_failure(task: asyncio.Task) -> None:
    if not task.cancelled() and task.exception() is not None and not isinstance(task.exception(), ConnectionClosed):
        log.error("sending a frame failed", exc_info=task.exception())


ReopenSocket = Callable[[], Awaitable[ClientConnection]]
RESUME_BACKOFF = (0.05, 2.0)  # seconds between reconnection attempts: the first, and the most


class Connection:
    """A multiplexed connection. Make sessions with `session()`; close with `await close()`.

    A resumable connection (the default, see `make_resumable`) outlives its socket: when the socket drops,
    it reconnects with backoff, resumes its sessions with the token the server gave it, and sends again every
    request not answered yet; the server applies each once. Only past the server's resume window (or if the
    server lost the sessions, say its worker process died) do the waiting requests fail, with
    ConnectionLostError, and the connection goes on with new sessions.
    """

    def __init__(self, ws: ClientConnection, url: str, request_timeout: float | None,
                 max_frame_bytes: int = p.DEFAULT_MAX_FRAME_BYTES, reopen: ReopenSocket | None = None) -> None:
        self.url = url
        self.request_timeout = request_timeout
        self._ws = ws
        self._reopen = reopen  # a new socket to the same server, for resuming
        self._loop = asyncio.get_running_loop()
        self._pending: dict[int, asyncio.Future] = {}
        self._messages: dict[int, dict] | None = None  # resumable: the requests of _pending, to send again
        self._batches: dict[int, _Batch] = {}  # by first id
        self._starts: list[int] = []  # their first ids, ascending: a batch is found by bisection
        self._next_id = 1
        self._outbox = Outbox(self._send_frame, self._loop.call_soon, self._unencodable, max_frame_bytes)
        self._closed_reason: str | None = None
        self._closing = False
        self.resume: dict[str, Any] | None = None  # the server's resumable answer: token, window, worker(s)
        self.resumed = 0  # how many times the socket dropped and the sessions were resumed
        self._reader = self._loop.create_task(self._read())

    @property
    def closed(self) -> bool:
        return self._closed_reason is not None

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

    def _send_frame(self, frame: bytes) -> None:
        if self._ws.state is not State.OPEN:  # dropped: resumed requests are sent again, the others failed
            return
        try:  # written at once unless the connection is paused (backpressure)
            done, task = start_eagerly(self._ws.send(frame, text=True))
        except ConnectionClosed:
            return
        if not done:
            task.add_done_callback(_log_send_failure)

    def _unencodable(self, message: dict, exc: Exception) -> None:
        """A request that cannot be sent is answered here, with the error, and left out of the frame."""
        error = InvalidActionError(f"the {message.get('op')} request cannot be sent as JSON ({exc}); use JSON "
                                   "types (str, int, float, bool, None, list, dict)")
        rid = message["id"]
        future = self._pop_pending(rid)
        if future is not None:
            if not future.done():
                future.set_exception(error)
            return None
        batch = self._batch_of(rid)
        if batch is not None:
            self._route_error(batch, rid, error)
        return None

    def _pop_pending(self, rid: Any) -> asyncio.Future | None:
        if self._messages is not None:
            self._messages.pop(rid, None)
        return self._pending.pop(rid, None)

    async def _read(self) -> None:
        reason = "the server closed the connection"
        try:
            while True:
                reason, resumable = await self._read_socket()
                if not resumable or self._closing or self.resume is None or self._reopen is None:
                    break
                try:
                    resumed = await self._resume(reason)
                except Exception:
                    log.exception("resuming the connection to %s failed", self.url)
                    resumed = False
                if not resumed:
                    reason += f"; it could not be resumed within {self.resume['window']:g} s"
                    break
        finally:
            self._closed_reason = reason
            self._outbox.closed = True
            self._fail_waiting(reason)

    async def _read_socket(self) -> tuple[str, bool]:
        """Route the answers of the current socket until it closes: (why, whether a resume may help)."""
        try:
            async for frame in self._ws:
                self._route(orjson.loads(frame))
        except ConnectionClosed as exc:
            return f"the connection closed ({exc})", True
        except Exception as exc:  # a frame we cannot read: nothing after it can be trusted
            log.exception("reading from %s failed", self.url)
            await self._ws.close()
            return f"unreadable frame from the server ({exc})", False
        return "the server closed the connection", True

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

    async def _resume(self, reason: str) -> bool:
        """Reconnect and resume; True when reading goes on (resumed, or on a fresh socket whose sessions
        were lost), False when the server stayed out of reach for the whole resume window."""
        assert self.resume is not None and self._reopen is not None
        deadline = self._loop.time() + self.resume["window"]
        delay, wrong_worker = RESUME_BACKOFF[0], 0

        async def back_off() -> None:
            nonlocal delay
            await asyncio.sleep(min(delay, max(0.0, deadline - self._loop.time())))
            delay = min(2 * delay, RESUME_BACKOFF[1])

        while not self._closing and self._loop.time() < deadline:
            try:
                ws = await self._reopen()
            except UnauthorizedError:
                return False
            except (OSError, TimeoutError, OpenEnvGymError):
                await back_off()
                continue
            if self._closing:
                await ws.close()
                return False
            try:
                answer = await self._ask(ws, p.resume_request(self.next_id(), self.resume["token"]))
            except (ConnectionClosed, OSError, TimeoutError):
                await ws.close()
                await back_off()
                continue
            if "error" in answer:  # the server no longer holds the sessions (its worker restarted, say)
                self._fresh_socket(ws, f"{reason}, and {answer['error']['message']}")
                return True
            if answer.get("resumed"):
                self._ws = ws
                self.resumed += 1
                self._send_again()
                return True
            wrong_worker += 1  # the kernel gave this socket to another worker process: connect again
            if wrong_worker > 8 * self.resume.get("workers", 1) + 8:  # that worker never came back
                self._fresh_socket(ws, f"{reason}, and its worker process did not come back")
                return True
            await ws.close()
        return False

    async def _ask(self, ws: ClientConnection, request: dict) -> dict:
        """One request on a socket of our own, before it carries anything else."""
        await ws.send(orjson.dumps([request]).decode())
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

    def _expire(self, rid: int) -> None:
        future = self._pop_pending(rid)
        if future is not None and not future.done():
            future.set_exception(RequestTimeoutError(
                f"no answer from {self.url} within {self.request_timeout:g} s; raise request_timeout "
                "if the environment is slow"))

    def next_id(self) -> int:
        rid = self._next_id
        self._next_id += 1
        return rid

    def reserve_ids(self, count: int) -> int:
        """Reserve `count` consecutive request ids; return the first."""
        start = self._next_id
        self._next_id += count
        return start

    def _route(self, responses: list[dict]) -> None:
        """Hand each answer of a frame to its future, or to its batch's sink (one call per batch and frame)."""
        pending, messages = self._pending, self._messages
        batch: _Batch | None = None
        offsets: list[int] = []
        answers: list[dict] = []
        for response in responses:
            rid = response.get("id")
            if pending:
                future = pending.pop(rid, None)
                if future is not None:
                    if messages is not None:
                        messages.pop(rid, None)
                    if not future.done():
                        future.set_result(response)
                    continue
            if batch is None or not (type(rid) is int and batch.start <= rid < batch.stop):
                self._deliver(batch, offsets, answers)
                offsets, answers = [], []
                batch = self._batch_of(rid)
                if batch is None:
                    if "error" in response:
                        log.warning("server error for no request: %s", response["error"])
                    continue
            offset = rid - batch.start
            if not batch.answered[offset]:
                batch.answered[offset] = 1
                offsets.append(offset)
                answers.append(response)
        self._deliver(batch, offsets, answers)

    def _route_error(self, batch: _Batch, rid: int, error: Exception) -> None:
        offset = rid - batch.start
        if not batch.answered[offset]:
            batch.answered[offset] = 1
            self._deliver(batch, [offset], [error])

    def _deliver(self, batch: _Batch | None, offsets: list[int], answers: list) -> None:
        if batch is None or not offsets:
            return
        batch.remaining -= len(offsets)
        if batch.remaining == 0:
            self._forget(batch)
        batch.sink.answer(offsets, answers)

    def _batch_of(self, rid: object) -> _Batch | None:
        if type(rid) is int:
            index = bisect_right(self._starts, rid) - 1
            if index >= 0:
                batch = self._batches[self._starts[index]]
                if rid < batch.stop:
                    return batch
        return None

    def _forget(self, batch: _Batch) -> None:
        if self._batches.pop(batch.start, None) is not None:
            del self._starts[bisect_left(self._starts, batch.start)]

    def submit_batch(self, messages: list[dict], start: int, sink: BatchSink) -> _Batch:
        """Send requests whose ids are start, start+1, ...; their answers go to `sink` by offset."""
        if self._closed_reason is not None:
            raise ConnectionLostError(f"{self._closed_reason}; open a new connection")
        batch = _Batch(start, messages, sink)
        self._batches[start] = batch
        insort(self._starts, start)
        self._outbox.put_many(messages)
        return batch

    def forget_batch(self, batch: _Batch) -> None:
        """Stop routing answers to `batch` (its caller gave up waiting); late answers are dropped."""
        self._forget(batch)

    def submit(self, message: dict) -> asyncio.Future:
        """Queue one request and return the future of its raw response."""
        if self._closed_reason is not None:
            raise ConnectionLostError(f"{self._closed_reason}; open a new connection")
        future = self._loop.create_future()
        rid = message["id"]
        self._pending[rid] = future
        if self._messages is not None:
            self._messages[rid] = message
        self._outbox.put(message)
        if self.request_timeout is not None:
            timer = self._loop.call_later(self.request_timeout, self._expire, rid)
            future.add_done_callback(lambda _: timer.cancel())
        return future

    async def request(self, message: dict) -> dict:
        """Send a request and return its response; raise the typed error if it failed."""
        response = await self.submit(message)
        error = response.get("error")
        if error is not None:
            raise error_from_wire(error)
        return response

    async def info(self) -> dict[str, Any]:
        """The server's description of its environment, protocol version and limits."""
        response = await self.request(p.info_request(self.next_id()))
        response.pop("id")
        return response

    async def splits(self) -> list[dict[str, Any]]:
        """The environment's splits, each {"name", "type", "num_tasks"}; empty if it has no tasks."""
        return (await self.request(p.splits_request(self.next_id())))["splits"]

    async def tasks(self, split: str | None = None, start: int | None = None,
                    stop: int | None = None) -> list[dict[str, Any]]:
        """Tasks split[start:stop] (the first split by default). For trainers: they may hold answers."""
        return (await self.request(p.tasks_request(self.next_id(), split, start, stop)))["tasks"]

    def session(self) -> Session:
        """A handle for a new session; the server creates it at the first `reset`."""
        return Session(self)

    async def close(self) -> None:
        self._closing = True
        await self._ws.close()
        await asyncio.shield(self._reader)

    async def __aenter__(self) -> Connection:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class Session(TransportSession):
    """One environment instance on the server. `id` is None until the first reset."""

    __slots__ = ("connection", "id")

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self.id: str | None = None

    async def _request(self, message: dict) -> dict:
        try:
            return await self.connection.request(message)
        except Exception as exc:
            if ends_session(exc):
                self.id = None  # the server no longer holds it; the next reset starts a new one
            raise

    async def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[str, dict]:
        conn = self.connection
        response = await self._request(p.reset_request(conn.next_id(), self.id, seed, options))
        self.id = response["session"]
        return response["obs"], response["info"]

    async def step(self, action: Action) -> StepTuple:
        conn = self.connection
        r = await self._request(p.step_request(conn.next_id(), self.id, action))
        return r["obs"], r["reward"], r["terminated"], r["truncated"], r["info"]

    async def state(self) -> dict[str, Any]:
        if self.id is None:
            return Episode().state(None)  # never reset, or ended by the server: nothing runs
        state = await self._request(p.state_request(self.connection.next_id(), self.id))
        del state["id"]
        return state

    async def close(self) -> None:
        """End the session on the server. Idempotent."""
        if self.id is None or self.connection.closed:
            self.id = None
            return
        session_id, self.id = self.id, None
        with contextlib.suppress(UnknownSessionError, ConnectionLostError):  # already gone
            await self.connection.request(p.close_request(self.connection.next_id(), session_id))

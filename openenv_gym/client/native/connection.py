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
import logging
from bisect import insort
from typing import Any

from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed
from websockets.protocol import State

from openenv_gym.client.native.batches import Batch, BatchSink
from openenv_gym.client.native.deadlines import Deadlines
from openenv_gym.client.native.resume import ReopenSocket, Resuming
from openenv_gym.client.native.routing import Routing
from openenv_gym.client.native.session import Session
from openenv_gym.episode.groups import GroupScore
from openenv_gym.errors import (
    ConnectionLostError,
    InvalidActionError,
    RequestTimeoutError,
    UnknownOpError,
    error_from_wire,
)
from openenv_gym.protocol import answers as answers_protocol
from openenv_gym.protocol import native as p
from openenv_gym.protocol.outbox import Outbox
from openenv_gym.runtime.eager import EagerStarter

log = logging.getLogger(__name__)


def _log_send_failure(task: asyncio.Task) -> None:
    if not task.cancelled() and task.exception() is not None and not isinstance(task.exception(), ConnectionClosed):
        log.error("sending a frame failed", exc_info=task.exception())


class Connection(Routing, Resuming):
    """A multiplexed connection. Make sessions with `session()`; close with `await close()`.

    A resumable connection (the default, see resume.py) outlives its socket: when the socket drops,
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
        self._pending: dict[int, asyncio.Future] = {}  # in the order sent (and of their ids)
        self._deadlines = None if request_timeout is None else Deadlines(self._loop, request_timeout,
                                                                         self._expire_through)
        self._messages: dict[int, dict] | None = None  # resumable: the requests of _pending, to send again
        self._batches: dict[int, Batch] = {}  # by first id
        self._starts: list[int] = []  # their first ids, ascending: a batch is found by bisection
        self._next_id = 1
        self._outbox = Outbox(self._send_frame, self._loop.call_soon, self._unencodable, max_frame_bytes)
        self._eager = EagerStarter(self._loop)  # a frame is written at once, unless the socket makes it wait
        self._closed_reason: str | None = None
        self._closing = False
        self.resume: dict[str, Any] | None = None  # the server's resumable answer: token, window, worker(s)
        self.resumed = 0  # how many times the socket dropped and the sessions were resumed
        self.columns = False  # the server sends its plain step and reset answers in columns (use_columns)
        self._reader = self._loop.create_task(self._read())

    @property
    def closed(self) -> bool:
        return self._closed_reason is not None

    def _send_frame(self, frame: bytes) -> None:
        if self._ws.state is not State.OPEN:  # dropped: resumed requests are sent again, the others failed
            return
        try:  # written at once unless the connection is paused (backpressure)
            done, task = self._eager.start(self._ws.send(frame, text=True))
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

    def _expire_through(self, last: int) -> None:
        """Requests still waiting, up to id `last`, have waited request_timeout: they fail."""
        expired = []
        for rid in self._pending:
            if rid > last:
                break
            expired.append(rid)
        for rid in expired:
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

    def submit_batch(self, messages: list[dict], start: int, sink: BatchSink) -> Batch:
        """Send requests whose ids are start, start+1, ...; their answers go to `sink` by offset."""
        batch = Batch(start, messages, sink)
        if self._closed_reason is not None:  # failed like requests cut off by the close, not raised from a send
            self._loop.call_soon(batch.fail_unanswered, self._lost())
            return batch
        self._batches[start] = batch
        insort(self._starts, start)
        self._outbox.put_many(messages)
        return batch

    def _lost(self) -> ConnectionLostError:
        return ConnectionLostError(f"{self._closed_reason}; the sessions on it are gone; open a new connection")

    def forget_batch(self, batch: Batch) -> None:
        """Stop routing answers to `batch` (its caller gave up waiting); late answers are dropped."""
        self._forget(batch)

    def submit(self, message: dict) -> asyncio.Future:
        """Queue one request and return the future of its raw response."""
        future = self._loop.create_future()
        if self._closed_reason is not None:
            future.set_exception(self._lost())
            return future
        rid = message["id"]
        self._pending[rid] = future
        if self._messages is not None:
            self._messages[rid] = message
        self._outbox.put(message)
        if self._deadlines is not None:
            self._deadlines.add(rid)
        return future

    async def request(self, message: dict) -> dict:
        """Send a request and return its response; raise the typed error if it failed."""
        response = await self.submit(message)
        error = response.get("error")
        if error is not None:
            raise error_from_wire(error)
        return response

    async def use_columns(self) -> bool:
        """Ask the server to send the plain answers to step and reset requests that leave together as one message of
        columns (protocol/answers.py: one message to read per frame, not one per env); False where it cannot (a
        server of protocol 2 or older)."""
        try:
            answer = await self.request(answers_protocol.columns_request(self.next_id()))
        except UnknownOpError:
            return False
        self.columns = bool(answer.get("columns"))
        return self.columns

    async def info(self) -> dict[str, Any]:
        """The server's description of its environment, protocol version and limits."""
        response = await self.request(p.info_request(self.next_id()))
        response.pop("id")
        return response

    async def score_group(self, group: str, members: int) -> GroupScore:
        """The score of this connection's group `group` (its members reset with the option
        {"group": {"id": group, "member": m}}), once `members` of them have ended; the env's error if it failed."""
        response = await self.request(p.group_request(self.next_id(), group, members))
        return GroupScore(response["members"], response["rewards"], response["infos"])

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

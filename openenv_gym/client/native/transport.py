"""The native transport: openenv_gym servers, sessions multiplexed over a few WebSocket connections.

For the vector client it opens `connections_per_worker` connections to each worker process of the server
(the kernel picks a worker for each new connection; `info` says which) and places sessions on them in
contiguous blocks, so the answers of a lock-step batch come back in env order. A batch is one frame per
connection: per-request messages (answered as each finishes), or one `steps` (or `resets`, servers of protocol 2
on) request answered in columns.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from openenv_gym.client.local import check_env_args, local_server_url
from openenv_gym.client.native.connection import Connection
from openenv_gym.client.native.handshake import connect
from openenv_gym.client.native.session import Session
from openenv_gym.client.transport import DEFAULT_REQUEST_TIMEOUT, Answers, Pending, Reply, Transport
from openenv_gym.episode.groups import GroupScore
from openenv_gym.episode.results import Action
from openenv_gym.episode.state import ends_session
from openenv_gym.errors import error_from_wire
from openenv_gym.protocol import native as p

OPEN_CONCURRENCY = 256  # connection handshakes in flight at once while opening
Group = tuple[Connection, Sequence[int]]  # a connection and the offsets (into a batch) of its sessions


class NativeTransport(Transport):
    def __init__(self, url: str, *, env: str | None = None, token: str | None = None,
                 request_timeout: float | None = DEFAULT_REQUEST_TIMEOUT, open_timeout: float = 10.0,
                 connections_per_worker: int | None = None, env_args: dict[str, Any] | None = None) -> None:
        """env: not needed (a server serves one environment). connections_per_worker: None opens one connection
        (single sessions); a number opens that many to each worker process (many sessions). env_args: what a
        verifiers server must have been built with."""
        self.url = url
        self.token = token
        self.request_timeout = request_timeout
        self.open_timeout = open_timeout
        self.connections_per_worker = connections_per_worker
        self.env_args = env_args
        self.description: dict[str, Any] = {}
        self.protocol = 1  # the server's protocol version (2 answers `resets` in columns)
        self.connections: list[Connection] = []
        self._slots: list[Connection] = []  # placement order: round robin over workers, then connections
        self._turn = 0  # the slot the next sessions() starts at
        self._grouped: tuple[Sequence[Any], list[Group]] | None = None

    @classmethod
    def local_url(cls, env: str, workers: int = 1, env_args: dict[str, Any] | None = None,
                  sandbox: bool = True) -> str:
        """The embedded default: a local server for `env`, started on first use and stopped at exit."""
        return local_server_url(env, workers=workers, env_args=env_args, sandbox=sandbox)

    async def _connect(self) -> tuple[Connection, dict]:
        conn = await connect(self.url, token=self.token, open_timeout=self.open_timeout,
                             request_timeout=self.request_timeout)
        conn.server_gone = self.server_gone
        return conn, await conn.info()

    async def open(self) -> NativeTransport:
        conn, info = await self._connect()
        self.description = info["env"]
        self.protocol = info.get("protocol", 1)
        check_env_args(self.description, self.env_args, self.url)
        groups = [[conn]] if self.connections_per_worker is None else await self._per_worker(conn, info)
        self.connections = [c for group in groups for c in group]
        depth = max(map(len, groups))
        self._slots = [g[i] for i in range(depth) for g in groups if i < len(g)]
        return self

    async def _per_worker(self, conn: Connection, info: dict) -> list[list[Connection]]:
        """Connections until each worker process has `connections_per_worker` (within a bound)."""
        per_worker = self.connections_per_worker or 1
        workers = info.get("workers", 1)
        groups: list[list[Connection]] = [[] for _ in range(workers)]
        groups[info.get("worker", 0)].append(conn)
        attempts, budget = 1, 4 * workers * per_worker + 8
        opening = asyncio.Semaphore(OPEN_CONCURRENCY)

        async def one() -> tuple[Connection, dict]:
            async with opening:
                return await self._connect()

        # The kernel picks the worker of each new connection: open until every worker has its share.
        while (missing := sum(max(0, per_worker - len(g)) for g in groups)) and attempts < budget:
            opened = await asyncio.gather(*(one() for _ in range(missing)))
            attempts += missing
            surplus = []
            for conn, info in opened:
                group = groups[info.get("worker", 0)]
                (group if len(group) < per_worker else surplus).append(conn)
            await asyncio.gather(*(conn.close() for conn in surplus))
        return [g for g in groups if g]

    @property
    def closed(self) -> bool:
        return not self.connections or any(conn.closed for conn in self.connections)

    async def close(self) -> None:
        connections, self.connections, self._slots = self.connections, [], []
        await asyncio.gather(*(c.close() for c in connections), return_exceptions=True)

    def session(self) -> Session:
        return Session(self._slots[0])

    def sessions(self, count: int, align: int = 1) -> list[Session]:
        """Contiguous blocks, an equal share per connection (consecutive connections alternate workers), each a
        whole number of `align` sessions. Each call starts where the last one stopped, so sessions asked for a few
        at a time spread too."""
        slots = self._slots
        blocks = max(1, count // align)
        first, self._turn = self._turn, (self._turn + blocks) % len(slots)
        return [Session(slots[(first + min(j // align, blocks - 1) * len(slots) // blocks) % len(slots)])
                for j in range(count)]

    async def splits(self) -> list[dict[str, Any]]:
        return await self._slots[0].splits()

    async def tasks(self, split: str | None = None, start: int | None = None,
                    stop: int | None = None) -> list[dict[str, Any]]:
        return await self._slots[0].tasks(split, start, stop)

    # -- GRPO groups: kept per connection ----------------------------------------------------------

    def place(self, session: Session) -> Connection:  # type: ignore[override]
        return session.connection

    async def score_group(self, place: Connection, group: str, members: int) -> GroupScore:  # type: ignore[override]
        return await place.score_group(group, members)

    # -- batches: one frame per connection -----------------------------------------------------

    def _groups(self, sessions: Sequence[Session]) -> list[Group]:
        """The sessions' offsets grouped by connection. Sessions are placed in contiguous blocks, so envs in order
        make a run per connection: a range of offsets, found without a dict or list entry per session; out of order,
        the offsets are listed per connection. Remembered for the last list of sessions seen, since a vector client
        sends the same list every step."""
        cached = self._grouped
        if cached is not None and cached[0] is sessions:
            return cached[1]
        groups = _runs(sessions)
        if len(groups) > len(self.connections):
            by_conn: dict[int, tuple[Connection, list[int]]] = {}
            for offset, session in enumerate(sessions):
                conn = session.connection
                by_conn.setdefault(id(conn), (conn, []))[1].append(offset)
            groups = list(by_conn.values())
        self._grouped = (sessions, groups)
        return groups

    def send_resets(self, sessions: Sequence[Session], seeds: Sequence[int | None], options: Sequence[dict | None],
                    reply: Reply, together: bool = False) -> Pending:
        if together and self.protocol >= 2:
            return self._submit_columns(sessions, reply, True, lambda rid, ids, at: p.resets_request(
                rid, ids, _taken(seeds, at), _taken(options, at)))

        def requests(start: int, offsets: Sequence[int]) -> list[dict]:
            return [p.reset_request(start + k, sessions[o].id, seeds[o], options[o]) for k, o in enumerate(offsets)]

        return self._submit(sessions, requests, reply, resets=True)

    def send_steps(self, sessions: Sequence[Session], actions: Sequence[Action], reply: Reply,
                   together: bool = False) -> Pending:
        if together:
            return self._submit_columns(sessions, reply, False,
                                        lambda rid, ids, at: p.steps_request(rid, ids, _taken(actions, at)))

        def requests(start: int, offsets: Sequence[int]) -> list[dict]:
            return [p.step_request(start + k, sessions[o].id, actions[o]) for k, o in enumerate(offsets)]

        return self._submit(sessions, requests, reply, resets=False)

    def _submit(self, sessions: Sequence[Session], requests: Any, reply: Reply, resets: bool) -> Pending:
        """Per-request messages, one frame per connection; answers go to `reply` as they arrive."""
        pending = _Batches()
        for conn, offsets in self._groups(sessions):
            start = conn.reserve_ids(len(offsets))
            sink = _Sink(sessions, offsets, reply, resets)
            pending.batches.append((conn, conn.submit_batch(requests(start, offsets), start, sink)))
        return pending

    def _submit_columns(self, sessions: Sequence[Session], reply: Reply, resets: bool,
                        request: Callable[[int, list, Sequence[int]], dict]) -> Pending:
        """Lock-step: one `steps` (or `resets`) request per connection, answered in columns; `request(id, the
        sessions' ids, their offsets)` builds it."""
        pending = _Columns()
        for conn, offsets in self._groups(sessions):
            ids = [s.id for s in _taken(sessions, offsets)]
            pending.requests.append(_ColumnsRequest(sessions, offsets, reply, resets,
                                                    conn.submit(request(conn.next_id(), ids, offsets))))
        return pending


def _taken(values: Sequence[Any], offsets: Sequence[int]) -> list[Any]:
    """values[offsets], as a list: a slice for a run of offsets."""
    if type(offsets) is range:
        return list(values[offsets.start:offsets.stop])
    return [values[o] for o in offsets]


def _runs(sessions: Sequence[Session]) -> list[Group]:
    """A group for each run of consecutive sessions on one connection."""
    runs: list[Group] = []
    if sessions:
        start, conn = 0, sessions[0].connection
        for offset, session in enumerate(sessions):
            if session.connection is not conn:
                runs.append((conn, range(start, offset)))
                start, conn = offset, session.connection
        runs.append((conn, range(start, len(sessions))))
    return runs


class _Sink:
    """Turns the per-request answers of one connection's batch into Answers (and tracks session ids)."""

    __slots__ = ("offsets", "reply", "resets", "sessions")

    def __init__(self, sessions: Sequence[Session], offsets: Sequence[int], reply: Reply, resets: bool) -> None:
        self.sessions, self.offsets, self.reply, self.resets = sessions, offsets, reply, resets

    def answer(self, positions: list[int], answers: list) -> None:
        if all(type(answer) is dict and "error" not in answer for answer in answers):  # the usual case, by columns
            self._reply_columns(positions, lambda name: [answer[name] for answer in answers])
            return
        sessions, size = self.sessions, len(answers)
        at = [self.offsets[k] for k in positions]
        out = Answers(at, [], [], [], [], [], [None] * size)
        for j, answer in enumerate(answers):
            session = sessions[at[j]]
            if type(answer) is dict and "error" not in answer:
                if self.resets:
                    session.id = answer["session"]
                out.obs.append(answer["obs"])
                out.rewards.append(0.0 if self.resets else answer["reward"])
                out.terminated.append(False if self.resets else answer["terminated"])
                out.truncated.append(False if self.resets else answer["truncated"])
                out.infos.append(answer["info"])
                continue
            error = answer if isinstance(answer, Exception) else error_from_wire(answer["error"])
            if ends_session(error):
                session.id = None
            out.errors[j] = error  # type: ignore[index]
            out.obs.append("")
            out.rewards.append(0.0)
            out.terminated.append(False)
            out.truncated.append(False)
            out.infos.append({})
        self.reply(out)

    def answer_columns(self, positions: list[int], message: dict, entries: Sequence[int]) -> None:
        self._reply_columns(positions, lambda name: _taken(message[name], entries))

    def _reply_columns(self, positions: list[int], column: Callable[[str], list]) -> None:
        """Plain answers only, read a column at a time (`column(name)`: the column's values, in `positions` order)."""
        at = [self.offsets[k] for k in positions]
        obs, infos = column("obs"), column("info")
        if self.resets:
            for offset, session_id in zip(at, column("session"), strict=True):
                self.sessions[offset].id = session_id
            self.reply(_reset_answers(at, obs, infos))
        else:
            self.reply(Answers(at, obs, column("reward"), column("terminated"), column("truncated"), infos))


class _ColumnsRequest:
    """One `steps` or `resets` request: its column answer becomes Answers; a failed request fails each of its
    entries."""

    __slots__ = ("future", "offsets", "reply", "resets", "sessions", "settled")

    def __init__(self, sessions: Sequence[Session], offsets: Sequence[int], reply: Reply, resets: bool,
                 future: asyncio.Future) -> None:
        self.sessions, self.offsets, self.reply, self.resets, self.future = sessions, offsets, reply, resets, future
        self.settled = False
        future.add_done_callback(self.answered)

    def answered(self, future: asyncio.Future) -> None:
        if self.settled or future.cancelled():
            return
        self.settled = True
        failure = future.exception()
        response = None if failure is not None else future.result()
        sessions, offsets = self.sessions, self.offsets
        if failure is None and "obs" in response:
            errors = None
            if "error" in response:
                errors = [None if wire is None else error_from_wire(wire) for wire in response["error"]]
                for offset, error in zip(offsets, errors, strict=True):
                    if error is not None and ends_session(error):
                        sessions[offset].id = None
            if not self.resets:
                self.reply(Answers(offsets, response["obs"], response["reward"], response["terminated"],
                                   response["truncated"], response["info"], errors))
                return
            for k, (offset, session_id) in enumerate(zip(offsets, response["session"], strict=True)):
                if errors is None or errors[k] is None:
                    sessions[offset].id = session_id
            self.reply(_reset_answers(offsets, response["obs"], response["info"], errors))
        else:
            self.fail(failure if failure is not None else error_from_wire(response["error"]))

    def fail(self, error: Exception) -> None:
        self.settled = True
        self.reply(_failed_all(self.sessions, self.offsets, error))


def _reset_answers(offsets: Sequence[int], obs: list, infos: list, errors: list | None = None) -> Answers:
    """Reset answers as Answers: no reward, nothing ended."""
    size = len(offsets)
    return Answers(offsets, obs, [0.0] * size, [False] * size, [False] * size, infos, errors)


def _failed_all(sessions: Sequence[Session], offsets: Sequence[int], error: Exception) -> Answers:
    if ends_session(error):
        for offset in offsets:
            sessions[offset].id = None
    size = len(offsets)
    return Answers(offsets, [""] * size, [0.0] * size, [False] * size, [False] * size, [{}] * size, [error] * size)


class _Batches(Pending):
    def __init__(self) -> None:
        self.batches: list[tuple[Connection, Any]] = []

    @property
    def done(self) -> bool:
        return all(batch.remaining == 0 for _, batch in self.batches)

    def abandon(self, error: Exception) -> None:
        for conn, batch in self.batches:
            conn.forget_batch(batch)
            batch.fail_unanswered(error)


class _Columns(Pending):
    def __init__(self) -> None:
        self.requests: list[_ColumnsRequest] = []

    @property
    def done(self) -> bool:
        return all(request.settled for request in self.requests)

    def abandon(self, error: Exception) -> None:
        for request in self.requests:
            if not request.settled:  # an answer that arrived but was not handled yet still counts
                if request.future.done() and not request.future.cancelled():
                    request.answered(request.future)
                else:
                    request.fail(error)

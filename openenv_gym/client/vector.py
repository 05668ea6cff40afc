"""AsyncVectorClient: N sessions over a few multiplexed connections to one or more servers.

    async with AsyncVectorClient("ws://127.0.0.1:8000", num_envs=1024) as client:
        result = await client.reset(seed=0)
        result = await client.step(["hello"] * 1024)          # lock-step: all answers
        client.send(actions, ids=[3, 7])                        # EnvPool style:
        first = await client.recv(min_results=1)                # whoever answers first

Each `send` is one batch frame per connection (not one message per env) and the answers are routed
by request-id block, with no future per env. Sessions are spread over the given URLs and, within a
server, evenly over its worker processes. A session error is reported for that env only
(`result.errors`); a full server (`capacity`) on reset moves the env to another URL.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from itertools import repeat
from typing import Any

import numpy as np

from openenv_gym import protocol as p
from openenv_gym.client.connection import DEFAULT_REQUEST_TIMEOUT, Connection, connect
from openenv_gym.client.results import VectorResult, failure_outcome, joined, merged, reordered
from openenv_gym.errors import (
    CapacityError,
    ErrorCode,
    NoEpisodeError,
    OpenEnvGymError,
    ProtocolError,
    RequestTimeoutError,
    error_from_wire,
)

Ids = Sequence[int] | np.ndarray | None
OPEN_CONCURRENCY = 256  # connection handshakes in flight at once while opening


_STEP, _RESET = 0, 1


class _Sink:
    """Routes the answers of one connection's batch to the client, tagged with env and kind."""

    __slots__ = ("client", "envs", "kind", "ready")

    def __init__(self, client: AsyncVectorClient, envs: list[int], kind: int) -> None:
        self.client, self.envs, self.kind, self.ready = client, envs, kind, client._ready

    def answer(self, offsets: list[int], answers: list[dict] | list[Exception]) -> None:
        ready, envs = self.ready, self.envs
        ready.extend(zip([envs[o] for o in offsets], repeat(self.kind), answers))
        client = self.client
        if client._waiter is not None and len(ready) >= client._want:
            client._wake()


class AsyncVectorClient:
    def __init__(self, urls: str | Sequence[str], num_envs: int, *, token: str | None = None,
                 connections_per_worker: int = 2, request_timeout: float | None = DEFAULT_REQUEST_TIMEOUT,
                 open_timeout: float = 10.0) -> None:
        if num_envs < 1:
            raise ValueError(f"num_envs must be at least 1, got {num_envs}")
        self.urls = [urls] if isinstance(urls, str) else list(urls)
        if not self.urls:
            raise ValueError("AsyncVectorClient needs at least one server URL")
        self.num_envs = num_envs
        self.token = token
        self.connections_per_worker = connections_per_worker
        self.request_timeout = request_timeout
        self.open_timeout = open_timeout
        self.description: dict[str, Any] = {}
        self.connections: list[Connection] = []
        self._by_url: dict[str, list[list[Connection]]] = {}  # url -> connections grouped by worker
        self.conn_of: list[Connection] = []
        self.session_ids: list[str | None] = [None] * num_envs
        self.live = np.zeros(num_envs, dtype=bool)  # an episode is running
        self.in_flight = np.zeros(num_envs, dtype=bool)
        self._ready: list[tuple[int, int, Any]] = []
        self._open_batches: list[tuple[Connection, Any]] = []
        self._all_grouped: list[tuple[Connection, list[int]]] | None = None
        self._all_ids = list(range(num_envs))
        self._waiter: asyncio.Future | None = None
        self._want = 0

    # -- connections and placement -------------------------------------------------------------

    async def _connect(self, url: str) -> tuple[Connection, dict]:
        conn = await connect(url, token=self.token, open_timeout=self.open_timeout,
                             request_timeout=self.request_timeout)
        return conn, await conn.info()

    async def _open_url(self, url: str) -> list[list[Connection]]:
        """Connections to `url` until each worker process has `connections_per_worker` (within a bound)."""
        conn, info = await self._connect(url)
        self.description = self.description or info["env"]
        workers = info.get("workers", 1)
        groups: list[list[Connection]] = [[] for _ in range(workers)]
        groups[info.get("worker", 0)].append(conn)
        attempts, budget = 1, 4 * workers * self.connections_per_worker + 8
        opening = asyncio.Semaphore(OPEN_CONCURRENCY)

        async def one() -> tuple[Connection, dict]:
            async with opening:
                return await self._connect(url)

        # The kernel picks the worker of each new connection: open until every worker has its share.
        while (missing := sum(max(0, self.connections_per_worker - len(g)) for g in groups)) and attempts < budget:
            opened = await asyncio.gather(*(one() for _ in range(missing)))
            attempts += missing
            surplus = []
            for conn, info in opened:
                group = groups[info.get("worker", 0)]
                (group if len(group) < self.connections_per_worker else surplus).append(conn)
            await asyncio.gather(*(conn.close() for conn in surplus))
        groups = [g for g in groups if g]
        for group in groups:
            self.connections.extend(group)
        return groups

    def _slots(self, url: str) -> list[Connection]:
        """The connections of `url` in placement order: round robin over workers, then over connections."""
        groups = self._by_url[url]
        depth = max(map(len, groups))
        return [g[i] for i in range(depth) for g in groups if i < len(g)]

    async def open(self) -> AsyncVectorClient:
        for url in self.urls:
            self._by_url[url] = await self._open_url(url)
        # Contiguous blocks: an equal share per URL, within it an equal share per connection (the
        # connections alternate workers), so the answers of a lock-step `steps` request line up with env order.
        per_url = [self._slots(url) for url in self.urls]
        self.conn_of = []
        for u, slots in enumerate(per_url):
            share = range(u * self.num_envs // len(per_url), (u + 1) * self.num_envs // len(per_url))
            self.conn_of += [slots[j * len(slots) // len(share)] for j in range(len(share))]
        self._all_grouped = None
        return self

    async def close(self) -> None:
        """Close every connection; the server ends their sessions."""
        connections, self.connections = self.connections, []
        await asyncio.gather(*(c.close() for c in connections), return_exceptions=True)
        self.live[:] = False
        self.session_ids = [None] * self.num_envs

    async def __aenter__(self) -> AsyncVectorClient:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- sending -------------------------------------------------------------------------------

    def _ids(self, ids: Ids) -> list[int]:
        if ids is None:
            return self._all_ids.copy()
        envs = [int(i) for i in ids]
        bad = [i for i in envs if not 0 <= i < self.num_envs]
        if bad:
            raise IndexError(f"env ids {bad[:5]} are out of range 0..{self.num_envs - 1}")
        if len(set(envs)) != len(envs):
            raise ValueError("an env id appears twice in one call; each env takes one request at a time")
        busy = [i for i in envs if self.in_flight[i]]
        if busy:
            raise RuntimeError(f"envs {busy[:5]} still wait for an answer; recv() it before sending again")
        return envs

    def _by_connection(self, envs: list[int]) -> list[tuple[Connection, list[int]]]:
        """Envs grouped by their connection (cached for the common case: all envs)."""
        if len(envs) == self.num_envs and self._all_grouped is not None:
            return self._all_grouped
        by_conn: dict[int, tuple[Connection, list[int]]] = {}
        for env in envs:
            conn = self.conn_of[env]
            by_conn.setdefault(id(conn), (conn, []))[1].append(env)
        groups = list(by_conn.values())
        if len(envs) == self.num_envs:
            self._all_grouped = groups
        return groups

    def _submit(self, envs: list[int], kind: int, build) -> None:
        """One batch frame per connection: `build(envs, start)` makes the requests, ids from `start`."""
        for conn, conn_envs in self._by_connection(envs):
            start = conn.reserve_ids(len(conn_envs))
            batch = conn.submit_batch(build(conn_envs, start), start, _Sink(self, conn_envs, kind))
            self._open_batches.append((conn, batch))
        self.in_flight[envs] = True

    def _checked_actions(self, actions: Sequence[p.Action], envs: list[int]) -> Any:
        """The actions indexable by env id, once the envs are known to have running episodes."""
        if len(actions) != len(envs):
            raise ValueError(f"got {len(actions)} actions for {len(envs)} envs")
        if not self.live[envs].all():
            ended = [i for i in envs if not self.live[i]]
            raise NoEpisodeError(f"envs {ended[:5]} have no running episode (never reset, or ended); "
                                 "reset them before stepping")
        return actions if envs == self._all_ids else dict(zip(envs, actions, strict=True))

    def send(self, actions: Sequence[p.Action], ids: Ids = None) -> None:
        """Step the envs `ids` (default all) with `actions`, without waiting; collect with `recv`."""
        envs = self._ids(ids)
        action_of = self._checked_actions(actions, envs)
        sessions = self.session_ids
        self._submit(envs, _STEP, lambda group, start: [
            {"id": start + k, "op": "step", "session": sessions[env], "action": action_of[env]}
            for k, env in enumerate(group)])

    def send_reset(self, ids: Ids = None, seed: int | Sequence[int | None] | None = None,
                   options: dict | None = None) -> None:
        """Reset the envs `ids` (creating their sessions if needed), without waiting."""
        envs = self._ids(ids)
        if seed is None or isinstance(seed, int | np.integer):
            seeds = [None if seed is None else int(seed) + k for k in range(len(envs))]
        else:
            seeds = [None if s is None else int(s) for s in seed]
            if len(seeds) != len(envs):
                raise ValueError(f"got {len(seeds)} seeds for {len(envs)} envs")
        seed_of = dict(zip(envs, seeds, strict=True))
        self.live[envs] = False
        sessions = self.session_ids
        self._submit(envs, _RESET, lambda group, start: [
            p.reset_request(start + k, sessions[env], seed_of[env], options) for k, env in enumerate(group)])

    # -- receiving -----------------------------------------------------------------------------

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def _wait_for(self, count: int, timeout: float | None) -> bool:
        """Wait until `count` answers are ready; False if `timeout` passed first."""
        if len(self._ready) >= count:
            return True
        self._want = count
        self._waiter = asyncio.get_running_loop().create_future()
        try:
            await asyncio.wait_for(self._waiter, timeout)
        except TimeoutError:
            return False
        finally:
            self._waiter = None
        return True

    def _expire_unanswered(self, waited: float) -> None:
        """Give up on requests with no answer yet: each becomes that env's RequestTimeoutError."""
        batches, self._open_batches = self._open_batches, []
        error = RequestTimeoutError(f"no answer within {waited:g} s; the session is abandoned, reset the env")
        for conn, batch in batches:
            conn.forget_batch(batch)
            batch.fail_unanswered(error)

    async def recv(self, min_results: int = 1, max_results: int | None = None,
                   timeout: float | None = None) -> VectorResult:
        """Answers that arrived: at least `min_results` (fewer if only that many are in flight, or if
        `timeout` passes first), at most `max_results`. Slow sessions never hold back fast ones."""
        await self._wait_for(min(min_results, int(self.in_flight.sum())), timeout)
        count = len(self._ready) if max_results is None else min(max_results, len(self._ready))
        taken = self._ready[:count]
        del self._ready[:count]  # the same list object: sinks hold it
        return self._collect(taken, [env for env, _, _ in taken])

    async def step(self, actions: Sequence[p.Action], ids: Ids = None) -> VectorResult:
        """Step envs `ids` (default all) and wait for every answer; results follow the order of `ids`.

        Lock-step: one `steps` request per connection, answered with columns (no per-env message
        to route on either side). Use send/recv to get fast sessions' answers before slow ones'.
        """
        if self.in_flight.any() or self._ready:
            raise RuntimeError("step() with send()s still outstanding; recv() them first")
        envs = self._ids(ids)
        return await self._steps(self._checked_actions(actions, envs), envs)

    async def step_and_reset(self, actions: Sequence[p.Action], stepping: list[int], resetting: list[int],
                             seeds: Sequence[int | None] | None = None, options: dict | None = None) -> VectorResult:
        """Step `stepping` (actions in that order) and reset `resetting` at once; results ordered by env id."""
        if self.in_flight.any() or self._ready:
            raise RuntimeError("step_and_reset() with send()s still outstanding; recv() them first")
        stepping, resetting = self._ids(stepping), self._ids(resetting)
        action_of = self._checked_actions(actions, stepping)
        self.send_reset(resetting, seeds, options)
        parts = [await self._steps(action_of, stepping)] if stepping else []
        parts.append(await self.gather(resetting))
        return joined(parts, sorted(stepping + resetting))

    async def _steps(self, action_of: Any, envs: list[int]) -> VectorResult:
        """Lock-step `steps` requests, one per connection; `action_of[env]` is each env's action."""
        sessions = self.session_ids
        groups = self._by_connection(envs)
        self.in_flight[envs] = True
        answers = await asyncio.gather(*(
            _ask(conn, p.steps_request(conn.next_id(), [sessions[e] for e in group], [action_of[e] for e in group]))
            for conn, group in groups), return_exceptions=True)
        self.in_flight[envs] = False
        return self._collect_columns(envs, groups, answers)

    async def reset(self, ids: Ids = None, seed: int | Sequence[int | None] | None = None,
                    options: dict | None = None) -> VectorResult:
        """Reset envs `ids` (default all); envs refused for capacity move to another URL if there is one."""
        if self.in_flight.any() or self._ready:
            raise RuntimeError("reset() with send()s still outstanding; recv() them first")
        envs = self._ids(ids)
        self.send_reset(envs, seed, options)
        result = await self.gather(envs)
        position = {env: k for k, env in enumerate(envs)}
        for _ in range(len(self.urls) - 1):
            full = [env for env, err in result.errors.items()
                    if isinstance(err, CapacityError) and self.session_ids[env] is None]
            if not full:
                break
            for env in full:
                self._move(env)
            seeds = None if seed is None else [
                int(seed) + position[env] if isinstance(seed, int | np.integer) else seed[position[env]]
                for env in full]
            self.send_reset(full, seeds, options)
            retried = await self.gather(full)
            result = merged(result, retried, position)
        full = [env for env, err in result.errors.items() if isinstance(err, CapacityError)]
        if full:
            raise CapacityError(
                f"{len(full)} of {len(envs)} sessions could not be placed: every server is full "
                f"({', '.join(self.urls)}); raise --max-sessions, add a server URL, or use fewer envs")
        return result

    def _move(self, env: int) -> None:
        """Place a session that found its server full on the next URL's connections."""
        current = next(url for url, groups in self._by_url.items() if any(self.conn_of[env] in g for g in groups))
        url = self.urls[(self.urls.index(current) + 1) % len(self.urls)]
        slots = self._slots(url)
        self.conn_of[env] = slots[env % len(slots)]
        self._all_grouped = None

    async def gather(self, envs: list[int]) -> VectorResult:
        """Wait for the answers of every env in `envs` (all sent, none received yet); ordered like `envs`.
        An env with no answer within request_timeout gets a RequestTimeoutError in `errors`."""
        if not await self._wait_for(len(envs), self.request_timeout):
            self._expire_unanswered(self.request_timeout or 0)
        taken = self._ready[:]
        self._ready.clear()  # the same list object: sinks hold it
        return self._collect(taken, envs)

    def _collect(self, taken: list[tuple[int, int, Any]], order: list[int]) -> VectorResult:
        """Turn answers into a VectorResult ordered like `order` (which holds exactly the answered envs).

        Plain lists in the loop and numpy conversions at the end: element-wise numpy writes cost
        about 100 ns each, several per env.
        """
        position = {env: k for k, env in enumerate(order)}
        n = len(order)
        obs: list[str] = [""] * n
        rewards = [0.0] * n
        terminated = [False] * n
        truncated = [False] * n
        infos: list[dict] = [{}] * n
        errors: dict[int, OpenEnvGymError] = {}
        live_now: list[int] = []
        sessions = self.session_ids
        for env, kind, answer in taken:
            k = position[env]
            if type(answer) is dict and "error" not in answer:
                if kind == _STEP:
                    obs[k], rewards[k], infos[k] = answer["obs"], answer["reward"], answer["info"]
                    term, trunc = answer["terminated"], answer["truncated"]
                    terminated[k], truncated[k] = term, trunc
                    if not (term or trunc):
                        live_now.append(env)
                else:
                    sessions[env] = answer["session"]
                    obs[k], infos[k] = answer["obs"], answer["info"]
                    live_now.append(env)
                continue
            error = answer if isinstance(answer, Exception) else error_from_wire(answer["error"])
            obs[k], infos[k], truncated[k], alive = self._failed(env, kind, error, errors)
            if alive:
                live_now.append(env)
        answered = [env for env, _, _ in taken]
        self.in_flight[answered] = False
        self.live[answered] = False
        self.live[live_now] = True
        self._open_batches = [(c, b) for c, b in self._open_batches if b.remaining]
        return VectorResult(np.asarray(order, dtype=np.int64), obs, np.array(rewards, dtype=np.float64),
                            np.array(terminated, dtype=bool), np.array(truncated, dtype=bool), infos, errors)


    def _failed(self, env: int, kind: int, error: Exception, errors: dict[int, OpenEnvGymError]
                ) -> tuple[str, dict, bool, bool]:
        """What an env whose request failed reports: (obs, info, truncated, episode still running)."""
        obs, info, truncated, alive = failure_outcome(error, stepped=kind == _STEP)
        if not alive:
            errors[env] = error  # type: ignore[assignment]
            if not isinstance(error, ProtocolError) or error.code in _SESSION_ENDING:
                self.session_ids[env] = None
        return obs, info, truncated, alive

    def _collect_columns(self, envs: list[int], groups: list[tuple[Connection, list[int]]],
                         answers: list[Any]) -> VectorResult:
        """Join the column answers of `steps` requests (one per connection) into a result ordered like `envs`."""
        order: list[int] = []
        obs: list[str] = []
        rewards: list[float] = []
        terminated: list[bool] = []
        truncated: list[bool] = []
        infos: list[dict] = []
        failed: list[tuple[int, Exception]] = []
        for (_, group), answer in zip(groups, answers, strict=True):
            base = len(order)
            order.extend(group)
            if isinstance(answer, Exception) or ("error" in answer and "obs" not in answer):
                error = answer if isinstance(answer, Exception) else error_from_wire(answer["error"])
                obs += [""] * len(group)
                rewards += [0.0] * len(group)
                terminated += [False] * len(group)
                truncated += [False] * len(group)
                infos += [{}] * len(group)
                failed += [(base + j, error) for j in range(len(group))]
                continue
            obs += answer["obs"]
            rewards += answer["reward"]
            terminated += answer["terminated"]
            truncated += answer["truncated"]
            infos += answer["info"]
            for j, wire in enumerate(answer.get("error") or ()):
                if wire is not None:
                    failed.append((base + j, error_from_wire(wire)))
        term = np.array(terminated, dtype=bool)
        trunc = np.array(truncated, dtype=bool)
        alive = ~(term | trunc)
        errors: dict[int, OpenEnvGymError] = {}
        for k, error in failed:
            obs[k], infos[k], trunc[k], alive[k] = self._failed(order[k], _STEP, error, errors)
        self.live[order] = alive
        result = VectorResult(np.asarray(order, dtype=np.int64), obs, np.array(rewards, dtype=np.float64),
                              term, trunc, infos, errors)
        return result if order == envs else reordered(result, envs)


async def _ask(conn: Connection, message: dict) -> dict:
    """The raw answer to one request; a closed connection fails this request only."""
    return await conn.submit(message)


_SESSION_ENDING = {ErrorCode.ENV_ERROR, ErrorCode.TIMEOUT, ErrorCode.UNKNOWN_SESSION}

"""AsyncVectorClient: N sessions over one or more servers, through any transport.

    async with AsyncVectorClient("ws://127.0.0.1:8000", num_envs=1024) as client:
        result = await client.reset(seed=0)
        result = await client.step(["hello"] * 1024)          # lock-step: all answers
        client.send(actions, ids=[3, 7])                        # EnvPool style:
        first = await client.recv(min_results=1)                # whoever answers first

Sessions are spread over the servers (an equal share each), and over each server as its transport places them
(the native one: evenly over the worker processes, one batch frame per connection). Every answer, of a
reset or a step, as it arrives or all at once, takes one path: the transport hands it over as columns
(`Answers`), and `_collect` turns what was taken into a VectorResult (arrivals.py). A session error is reported for that
env only (`result.errors`); a full server (`capacity`) on reset moves the env to another server.

Servers come and go (servers.py): when one is lost, its envs report the error once, and at their next reset they
move to the live servers (info["moved"] says from where to where); the source of the servers is asked again,
and servers that joined (a restarted Ray actor, a new pod) take envs from crowded ones as those reset. A reset
that fails for where it ran (a lost server, a full one) is tried again on a live server, with backoff, for
`reset_retry_window` seconds (retries.py; info["retries"] counts the tries that failed).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from functools import partial
from typing import Any

import numpy as np

from openenv_gym.client.arrivals import Arrivals, Chunk
from openenv_gym.client.fleet import Fleet, Group
from openenv_gym.client.results import STEP, VectorResult
from openenv_gym.client.retries import DEFAULT_RESET_RETRY_WINDOW, ResetRetries, Try
from openenv_gym.client.servers import Servers, server_source
from openenv_gym.client.transport import DEFAULT_REQUEST_TIMEOUT, Pending, Transport, TransportSession
from openenv_gym.client.transports import transport_class
from openenv_gym.episode.groups import GroupScore
from openenv_gym.episode.results import Action
from openenv_gym.episode.state import no_episode
from openenv_gym.errors import CapacityError, RequestTimeoutError, ServerUnreachableError

Ids = Sequence[int] | np.ndarray | None


class AsyncVectorClient(Fleet, Arrivals, ResetRetries):
    def __init__(self, urls: Servers, num_envs: int, *, transport: str = "native",
                 env: str | None = None, token: str | None = None, connections_per_worker: int = 2,
                 request_timeout: float | None = DEFAULT_REQUEST_TIMEOUT, open_timeout: float = 10.0,
                 env_args: dict[str, Any] | None = None,
                 reset_retry_window: float = DEFAULT_RESET_RETRY_WINDOW, align: int = 1) -> None:
        """urls: a server URL, a list of them, `dns+ws://NAME:PORT` (every address of NAME), or an object
        with `urls()` (see servers.py). transport: "native" (openenv_gym servers) or "ors" (ORS servers;
        `env` names the environment). reset_retry_window: seconds a reset that failed for its server (lost,
        full) is tried again on live ones before its failure is reported (0: never). align: envs [k*align,
        (k+1)*align) are placed together, on one connection (a GRPO group's members, for its server score)."""
        if num_envs < 1:
            raise ValueError(f"num_envs must be at least 1, got {num_envs}")
        self.source = server_source(urls)
        self.num_envs = num_envs
        self.request_timeout = request_timeout
        self.reset_retry_window = reset_retry_window
        self.align = align
        self._transport_class = transport_class(transport)
        self._options = {"env": env, "token": token, "request_timeout": request_timeout,
                         "open_timeout": open_timeout, "connections_per_worker": connections_per_worker,
                         "env_args": env_args}
        self.description: dict[str, Any] = {}
        self.live = np.zeros(num_envs, dtype=bool)  # an episode is running
        self.in_flight = np.zeros(num_envs, dtype=bool)
        self._all_ids = list(range(num_envs))
        self._all_array = np.arange(num_envs, dtype=np.int64)
        # the placement (fleet.py says what each is)
        self.transports: list[Transport] = []
        self.sessions: list[TransportSession] = []
        self.transport_of: list[int] = []
        self._placement: list[Group] | None = None
        self._serving: list[int] = []
        self._load: list[int] = []
        self._unbalanced = False
        self._refreshing: asyncio.Task | None = None
        self._next_refresh = math.inf
        self._replacing_until = 0.0
        self._moved: dict[int, dict[str, str]] = {}
        self._chores: set[asyncio.Task] = set()
        self._ready: list[Chunk] = []
        self._ready_count = 0
        self._pending: list[Pending] = []  # batches in flight and resets to try again, for gather() to abandon
        self._prune_at = 64
        self._waiter: asyncio.Future | None = None
        self._want = 0
        # what send() and send_reset() were asked for in this loop iteration: (envs, actions or resets)
        self._queued_steps: list[tuple[list[int], Sequence[Any]]] = []
        self._queued_resets: list[tuple[list[int], Sequence[Any]]] = []
        self._queued_batch_resets: list[tuple[list[int], Sequence[Any]]] = []  # send_reset(together=True)

    # -- opening ------------------------------------------------------------------------------------

    async def open(self) -> AsyncVectorClient:
        urls = list(dict.fromkeys(await asyncio.to_thread(self.source.urls)))
        if not urls:
            raise ServerUnreachableError(f"{self.source!r} lists no server; start one, or wait until one is ready")
        opened = await asyncio.gather(*(self._open_transport(url) for url in urls), return_exceptions=True)
        failures = [t for t in opened if isinstance(t, BaseException)]
        if failures:
            await asyncio.gather(*(t.close() for t in opened if isinstance(t, Transport)), return_exceptions=True)
            raise failures[0]
        self.transports = list(opened)  # type: ignore[arg-type]
        self._serving = list(range(len(urls)))
        self.description = self.transports[0].description
        sessions: list[TransportSession] = []
        blocks, align = self.num_envs // self.align, self.align
        for u, transport in enumerate(self.transports):  # contiguous blocks: an equal share per server
            share = ((u + 1) * blocks // len(urls) - u * blocks // len(urls)) * align
            if u == len(urls) - 1:
                share = self.num_envs - len(sessions)
            sessions += transport.sessions(share, align)
            self.transport_of += [u] * share
            self._load.append(share)
        self._adopt(sessions)
        self._asked(missing=False)
        return self

    async def close(self) -> None:
        """Close every connection; the servers end their sessions."""
        if self._refreshing is not None:
            self._refreshing.cancel()
        self._cancel_retries()
        self._queued_steps, self._queued_resets, self._queued_batch_resets = [], [], []
        transports, self.transports, self._serving = self.transports, [], []
        await asyncio.gather(*(t.close() for t in transports), return_exceptions=True)
        self.live[:] = False

    async def __aenter__(self) -> AsyncVectorClient:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- sending -------------------------------------------------------------------------------------

    def _ids(self, ids: Ids) -> list[int]:
        if ids is None:
            envs = self._all_ids
        elif len(ids) == 1:  # the one-env path (rollout streams): no comprehension, set or fancy indexing
            envs = [int(ids[0])]
            if not 0 <= envs[0] < self.num_envs:
                raise IndexError(f"env id {envs[0]} is out of range 0..{self.num_envs - 1}")
        else:
            envs = [int(i) for i in ids]
            bad = [i for i in envs if not 0 <= i < self.num_envs]
            if bad:
                raise IndexError(f"env ids {bad[:5]} are out of range 0..{self.num_envs - 1}")
            if len(set(envs)) != len(envs):
                raise ValueError("an env id appears twice in one call; each env takes one request at a time")
        if _any(self.in_flight, envs, self._all_ids):
            busy = [i for i in envs if self.in_flight[i]]
            raise RuntimeError(f"envs {busy[:5]} still wait for an answer; recv() it before sending again")
        return envs

    def _groups(self, envs: list[int]) -> list[Group]:
        if envs is self._all_ids:
            return self._all_groups()
        if len(self.transports) == 1:
            return [(self.transports[0], envs, [self.sessions[env] for env in envs])]
        by_transport: dict[int, tuple[list[int], list[TransportSession]]] = {}
        for env in envs:
            group_envs, group = by_transport.setdefault(self.transport_of[env], ([], []))
            group_envs.append(env)
            group.append(self.sessions[env])
        return [(self.transports[u], group_envs, group) for u, (group_envs, group) in by_transport.items()]

    def _checked_actions(self, actions: Sequence[Action], envs: list[int]) -> Sequence[Action]:
        if len(actions) != len(envs):
            raise ValueError(f"got {len(actions)} actions for {len(envs)} envs")
        if not _all(self.live, envs, self._all_ids):
            ended = [i for i in envs if not self.live[i]]
            raise no_episode(f"envs {ended[:5]}", "reset them before stepping")
        return actions

    def _send(self, envs: list[int], values: Sequence[Any], together: bool = False, reset: Try | None = None) -> None:
        """One batch per transport of steps, or of resets (`reset`): `values` (actions, or (seed, options) pairs)
        follow the order of `envs`."""
        groups = self._groups(envs)
        for transport, group_envs, group in groups:
            if len(groups) == 1:
                group_values = values
            else:
                value_of = dict(zip(envs, values, strict=True))
                group_values = [value_of[env] for env in group_envs]
            if reset is None:
                reply = partial(self._arrived, STEP, group_envs)
                self._pending.append(transport.send_steps(group, group_values, reply, together))
            else:
                reply = partial(self._reset_arrived, group_envs, group_values, reset)
                self._pending.append(transport.send_resets(group, [seed for seed, _ in group_values],
                                                           [options for _, options in group_values], reply,
                                                           together))

    def send(self, actions: Sequence[Action], ids: Ids = None) -> None:
        """Step the envs `ids` (default all) with `actions`, without waiting; collect with `recv`. The sends of one
        event-loop iteration leave together, one batch frame per connection: sending one env at a time (as
        each policy call returns) costs no more on the wire than sending them all at once."""
        envs = self._ids(ids)
        actions = self._checked_actions(actions, envs)
        _set(self.in_flight, envs, True)
        self._queue(self._queued_steps, envs, actions)

    def _queue(self, queued: list[tuple[list[int], Sequence[Any]]], envs: list[int], values: Sequence[Any]) -> None:
        """Steps (actions) or resets ((seed, options) pairs) to send with the others of this loop iteration."""
        if not self._queued_steps and not self._queued_resets and not self._queued_batch_resets:
            asyncio.get_running_loop().call_soon(self._send_queued)
        queued.append((envs, values))

    def _send_queued(self) -> None:
        resets, batch_resets = _joined(self._queued_resets), _joined(self._queued_batch_resets)
        steps = _joined(self._queued_steps)
        self._queued_resets, self._queued_batch_resets, self._queued_steps = [], [], []
        if not self.transports:  # closed meanwhile: close() let them go
            return
        now = asyncio.get_running_loop().time()
        if resets is not None:
            self._reset_on_live_servers(*resets, Try(now))
        if batch_resets is not None:
            self._reset_on_live_servers(*batch_resets, Try(now), together=True)
        if steps is not None:
            self._send(*steps)

    def send_reset(self, ids: Ids = None, seed: int | Sequence[int | None] | None = None,
                   options: dict | Sequence[dict] | None = None, together: bool = False) -> None:
        """Reset the envs `ids` (creating their sessions if needed), without waiting. `options`: one dict for all,
        or one per env. `together`: for a caller that waits for them all (a lock-step batch): each server answers
        its share at once, in columns, instead of each reset as it is done."""
        envs = self._ids(ids)
        if seed is None or isinstance(seed, int | np.integer):
            seeds = [None if seed is None else int(seed) + k for k in range(len(envs))]
        else:
            seeds = [None if s is None else int(s) for s in seed]
            if len(seeds) != len(envs):
                raise ValueError(f"got {len(seeds)} seeds for {len(envs)} envs")
        if options is None or isinstance(options, dict):
            resets = [(env_seed, options) for env_seed in seeds]
        elif len(options) != len(envs):
            raise ValueError(f"got {len(options)} reset options for {len(envs)} envs")
        else:
            resets = list(zip(seeds, options, strict=True))
        _set(self.live, envs, False)
        _set(self.in_flight, envs, True)
        self._queue(self._queued_batch_resets if together else self._queued_resets, envs, resets)

    # -- GRPO groups scored by the server (episode/groups.py) -------------------------------------------

    def place_of(self, env: int) -> tuple[int, Any] | None:
        """Where the env's episodes are kept for group scoring now (its server and connection): every member of
        a group must play there. None: its server scores no groups."""
        u = self.transport_of[env]
        place = self.transports[u].place(self.sessions[env])
        return None if place is None else (u, place)

    async def score_group(self, place: tuple[int, Any], group: str, members: int) -> GroupScore:
        """The server's score of group `group` kept at `place` (place_of), once `members` of its episodes ended."""
        u, where = place
        return await self.transports[u].score_group(where, group, members)

    # -- receiving: one path for every answer (arrivals.py) --------------------------------------------

    async def recv(self, min_results: int = 1, max_results: int | None = None,
                   timeout: float | None = None) -> VectorResult:
        """Answers that arrived: at least `min_results` (fewer if only that many are in flight, or if
        `timeout` passes first), at most `max_results`. Slow sessions never hold back fast ones."""
        await self._wait_for(min(min_results, int(self.in_flight.sum())), timeout)
        return self._collect(self._take(max_results), None)

    async def gather(self, envs: list[int]) -> VectorResult:
        """Wait for the answers of every env in `envs` (all sent, none received yet); ordered like `envs`.
        An env with no answer within request_timeout gets a RequestTimeoutError in `errors`."""
        if not await self._wait_for(len(envs), self.request_timeout):
            error = RequestTimeoutError(f"no answer within {self.request_timeout:g} s; the session is abandoned, "
                                        "reset the env")
            for pending in self._pending:
                pending.abandon(error)
        return self._collect(self._take(), envs)

    def _idle_check(self, what: str) -> None:
        if self.in_flight.any() or self._ready:
            raise RuntimeError(f"{what}() with send()s still outstanding; recv() them first")

    async def step(self, actions: Sequence[Action], ids: Ids = None) -> VectorResult:
        """Step envs `ids` (default all) and wait for every answer; results follow the order of `ids`.
        Lock-step: the transport answers each batch at once (the native one: a `steps` request per
        connection, answered in columns). Use send/recv to get fast sessions' answers before slow ones'."""
        self._idle_check("step")
        envs = self._ids(ids)
        self._send(envs, self._checked_actions(actions, envs), together=True)
        _set(self.in_flight, envs, True)
        return await self.gather(envs)

    async def step_and_reset(self, actions: Sequence[Action], stepping: list[int], resetting: list[int],
                             seeds: Sequence[int | None] | None = None,
                             options: dict | Sequence[dict] | None = None) -> VectorResult:
        """Step `stepping` (actions in that order) and reset `resetting` at once; results ordered by env id."""
        self._idle_check("step_and_reset")
        stepping, resetting = self._ids(stepping), self._ids(resetting)
        self._checked_actions(actions, stepping)
        self.send_reset(resetting, seeds, options)
        if stepping:
            self._send(stepping, actions, together=True)
            _set(self.in_flight, stepping, True)
        return await self.gather(sorted(stepping + resetting))

    async def reset(self, ids: Ids = None, seed: int | Sequence[int | None] | None = None,
                    options: dict | Sequence[dict] | None = None) -> VectorResult:
        """Reset envs `ids` (default all); envs refused for capacity move to another server if there is one, and
        CapacityError is raised if some found no room within the retry window."""
        self._idle_check("reset")
        envs = self._ids(ids)
        self.send_reset(envs, seed, options, together=True)
        result = await self.gather(envs)
        full = [env for env, err in result.errors.items() if isinstance(err, CapacityError)]
        if full:
            raise CapacityError(
                f"{len(full)} of {len(envs)} sessions could not be placed: every server is full "
                f"({', '.join(self.urls)}); raise --max-sessions, add a server URL, or use fewer envs")
        return result


def _joined(queued: list[tuple[list[int], Sequence[Any]]]) -> tuple[list[int], Sequence[Any]] | None:
    """The envs and values of several calls as one batch; a single call's as given (a vector env's list of all
    envs is recognized by identity)."""
    if not queued:
        return None
    if len(queued) == 1:
        return queued[0]
    envs: list[int] = []
    values: list[Any] = []
    for some_envs, some_values in queued:
        envs += some_envs
        values += some_values
    return envs, values


def _any(flags: np.ndarray, envs: list[int], all_envs: list[int]) -> bool:
    """Whether any of `envs` is flagged; a scalar read for one env (fancy indexing costs a microsecond)."""
    if len(envs) == 1:
        return bool(flags[envs[0]])
    return bool((flags if envs is all_envs else flags[envs]).any())


def _all(flags: np.ndarray, envs: list[int], all_envs: list[int]) -> bool:
    if len(envs) == 1:
        return bool(flags[envs[0]])
    return bool((flags if envs is all_envs else flags[envs]).all())


def _set(flags: np.ndarray, envs: list[int], value: bool) -> None:
    if len(envs) == 1:
        flags[envs[0]] = value
    else:
        flags[envs] = value

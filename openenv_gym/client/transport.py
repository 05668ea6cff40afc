"""The client's one seam: a Transport is one server speaking one wire format.

    transport = await NativeTransport(url).open()         # or OrsTransport(url, env="counter"), ...
    session = transport.session()                         # the server creates it at its first reset
    obs, info = await session.reset(seed=0)
    obs, reward, terminated, truncated, info = await session.step("hello")
    await session.state(); await session.close()
    await transport.splits(); await transport.tasks("test", 0, 10)

Batches (the vector client's way in): `send_resets` and `send_steps` hand every answer to `reply` as columns
(`Answers`), as it arrives or, with `together=True`, all at once. The default sends one request per session,
concurrently; a transport whose wire has batch frames overrides them. RemoteEnv, RemoteVectorEnv and
AsyncVectorClient pick a transport once (`transport_class`) and know nothing of the wire beyond it.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from openenv_gym.episode.groups import GroupScore
from openenv_gym.episode.results import Action
from openenv_gym.errors import EnvError

StepTuple = tuple[str, float, bool, bool, dict]
DEFAULT_REQUEST_TIMEOUT = 300.0


@dataclass(slots=True)
class Answers:
    """Answers to some requests of a batch, as columns: entry j answers the request at `offsets[j]`.
    A failed entry has its exception in `errors` (None when no entry failed) and empty values."""

    offsets: Sequence[int]
    obs: list[str]
    rewards: list[float]
    terminated: list[bool]
    truncated: list[bool]
    infos: list[dict]
    errors: list[Exception | None] | None = None

    @classmethod
    def of(cls, offsets: Sequence[int], outcomes: Sequence[StepTuple | tuple[str, dict] | Exception]) -> Answers:
        """Answers from per-request outcomes: a step tuple, a reset's (obs, info), or the exception."""
        answers = cls(offsets, [], [], [], [], [], [])
        errors: list[Exception | None] = []
        for outcome in outcomes:
            if isinstance(outcome, Exception):
                obs, reward, terminated, truncated, info = "", 0.0, False, False, {}
            elif len(outcome) == 2:
                (obs, info), reward, terminated, truncated = outcome, 0.0, False, False
            else:
                obs, reward, terminated, truncated, info = outcome
            answers.obs.append(obs)
            answers.rewards.append(reward)
            answers.terminated.append(terminated)
            answers.truncated.append(truncated)
            answers.infos.append(info)
            errors.append(outcome if isinstance(outcome, Exception) else None)
        answers.errors = errors if any(e is not None for e in errors) else None
        return answers


Reply = Callable[[Answers], None]


class Pending(ABC):
    """A batch in flight."""

    @property
    @abstractmethod
    def done(self) -> bool:
        """Every request of the batch is answered."""

    @abstractmethod
    def abandon(self, error: Exception) -> None:
        """Stop waiting: the requests with no answer yet get `error`; answers arriving later are dropped."""


class TransportSession(ABC):
    """One session on a server. `id` is None until its first reset, and again once the server ended it."""

    __slots__ = ()
    id: str | None

    @abstractmethod
    async def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[str, dict]: ...

    @abstractmethod
    async def step(self, action: Action) -> StepTuple: ...

    @abstractmethod
    async def state(self) -> dict[str, Any]:
        """{"session", "episode_id", "running", "steps", "max_steps"}: the session's id, its episode's id, whether
        the episode runs, its steps so far and its step limit (None: none); and "extras", the environment's own
        state, when it tells any (OpenEnv's State fields beyond episode_id and step_count, say)."""

    @abstractmethod
    async def close(self) -> None:
        """End the session on the server. Idempotent."""


class Transport(ABC):
    """One server, one wire format: sessions on it and its task catalog."""

    url: str
    description: dict[str, Any]  # the environment's description, known once open
    # Whether the server is gone for good, for transports whose connections wait for a dropped server to come back
    # (the native one's resume); set before open by whoever knows (the vector client asks its server source).
    server_gone: Callable[[], Awaitable[bool]] | None = None

    @classmethod
    def local_url(cls, env: str, workers: int = 1, env_args: dict[str, Any] | None = None,
                  sandbox: bool = True) -> str:
        """The URL of a local server for `env` (the embedded default), for transports that can start one
        (sandbox=False: started with --no-sandbox)."""
        raise ValueError(f"{cls.__name__} cannot start a local server for {env!r}: pass base_url=")

    @abstractmethod
    async def open(self) -> Transport: ...

    @abstractmethod
    async def close(self) -> None:
        """Close the connections; the server ends the sessions made through them."""

    @property
    @abstractmethod
    def closed(self) -> bool: ...

    @abstractmethod
    def session(self) -> TransportSession: ...

    def sessions(self, count: int, align: int = 1) -> list[TransportSession]:
        """`count` sessions, placed as the transport sees fit (spread over connections and workers), in blocks of
        `align` that share a place (a GRPO group's members: see place())."""
        return [self.session() for _ in range(count)]

    @abstractmethod
    async def splits(self) -> list[dict[str, Any]]:
        """The environment's splits, each {"name", "type", "num_tasks"}; empty if it has no tasks."""

    @abstractmethod
    async def tasks(self, split: str | None = None, start: int | None = None,
                    stop: int | None = None) -> list[dict[str, Any]]:
        """Tasks split[start:stop] (the first split by default). For trainers: they may hold answers."""

    # -- GRPO groups scored by the server -----------------------------------------------------------

    def place(self, session: TransportSession) -> Any:
        """Where a session's episodes are kept for group scoring: the members of one group must share it.
        None: this transport's servers score no groups."""
        return None

    async def score_group(self, place: Any, group: str, members: int) -> GroupScore:
        raise EnvError(f"{type(self).__name__} servers score no groups; score them on the client "
                       "(openenv_gym.rollout.judges.GroupJudge)")

    # -- batches ---------------------------------------------------------------------------------

    def send_resets(self, sessions: Sequence[TransportSession], seeds: Sequence[int | None],
                    options: Sequence[dict | None], reply: Reply, together: bool = False) -> Pending:
        """Reset each session with its seed and options; with `together`, one reply holds every answer."""
        return _Each([s.reset(seed, opts) for s, seed, opts in zip(sessions, seeds, options, strict=True)], reply,
                     together)

    def send_steps(self, sessions: Sequence[TransportSession], actions: Sequence[Action], reply: Reply,
                   together: bool = False) -> Pending:
        """Step each session; with `together`, one reply holds every answer (lock-step)."""
        return _Each([s.step(a) for s, a in zip(sessions, actions, strict=True)], reply, together)


class _Each(Pending):
    """One request per session, run concurrently; each answer goes to `reply` as it comes, or all at once."""

    def __init__(self, calls: list[Coroutine], reply: Reply, together: bool) -> None:
        loop = asyncio.get_running_loop()
        self.reply, self.together = reply, together
        self.outcomes: list[Any] = [None] * len(calls)
        self.settled = [False] * len(calls)
        self.waiting = len(calls)  # requests not settled yet
        self.tasks = [loop.create_task(call) for call in calls]
        for offset, task in enumerate(self.tasks):
            task.add_done_callback(partial(self._settle, offset))

    def _settle(self, offset: int, task: asyncio.Task, error: Exception | None = None) -> None:
        if self.settled[offset] or (error is None and task.cancelled()):  # answered, or the loop is shutting down
            return
        self.settled[offset] = True
        self.waiting -= 1
        outcome = error if error is not None else task.exception() or task.result()
        if not self.together:
            self.reply(Answers.of((offset,), (outcome,)))
            return
        self.outcomes[offset] = outcome
        if self.waiting == 0:
            self.reply(Answers.of(range(len(self.outcomes)), self.outcomes))

    @property
    def done(self) -> bool:
        return self.waiting == 0

    def abandon(self, error: Exception) -> None:
        for offset, task in enumerate(self.tasks):
            if task.done():
                self._settle(offset, task)  # done, its callback not run yet
            else:
                task.cancel()
                self._settle(offset, task, error)

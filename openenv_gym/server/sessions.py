"""Session records, their owners, and the server-wide session count shared by worker processes."""

from __future__ import annotations

import asyncio
import secrets
from contextlib import AbstractContextManager, nullcontext
from time import perf_counter
from typing import Any

from openenv_gym.adapters.environment import Environment
from openenv_gym.episode.state import ENV_SECONDS, Episode


def new_session_id() -> str:
    """128 random bits, URL-safe: unguessable, so a session can only be named by who was told."""
    return secrets.token_urlsafe(16)


def short(session_id: str) -> str:
    """A session id as error messages show it: enough to recognise, too little to use."""
    return session_id[:8] + "…"


class Owner:
    """Whoever holds sessions: one connection of a front end. Only its owner can name a session."""

    __slots__ = ("sessions",)
    # Whether a session whose environment raised ends (the native protocol's rule); a front end whose protocol
    # keeps the environment and its episode going (OpenEnv's) says no.
    failures_end_sessions = True

    def __init__(self) -> None:
        self.sessions: dict[str, Session] = {}


class Session(Episode):
    """One environment instance and its episode. `busy` while a request runs in a task."""

    __slots__ = ("began", "env", "group", "id", "last_active", "owner", "returned", "seconds", "task", "timed_out",
                 "timing")

    def __init__(self, session_id: str, env: Environment, owner: Owner, now: float) -> None:
        super().__init__()
        self.id = session_id
        self.env = env
        self.owner = owner
        self.task: asyncio.Task | None = None  # the in-flight reset/step, when it had to wait
        self.timed_out = False
        self.last_active = now
        self.group: tuple[str, int] | None = None  # (group id, member) of its episode, when it is in a group
        self.returned = 0.0  # the episode's rewards so far (counted for group members only)
        self.timing = False  # whether its episode's reset asked for env_seconds (episode/state.py)
        self.began = 0.0  # when its request in flight started (perf_counter)
        self.seconds = 0.0  # the time its episode's reset and steps took at the server

    def timed(self, info: dict[str, Any]) -> None:
        """A step of a timed episode was answered: count its time; the total goes in the final step's info."""
        self.seconds += perf_counter() - self.began
        if not self.live:
            info[ENV_SECONDS] = round(self.seconds, 6)

    @property
    def busy(self) -> bool:
        return self.task is not None


class SessionCounter:
    """Counts sessions over all worker processes and enforces the server-wide maximum.

    Each worker writes only its own slot of a shared array; the lock makes check-and-add exact,
    so the server never holds more than `limit` sessions. A restarted worker's slot is zeroed.
    """

    def __init__(self, limit: int, slots: Any = None, index: int = 0,
                 lock: AbstractContextManager | None = None) -> None:
        self.limit = limit
        self.slots = slots if slots is not None else [0]
        self.index = index
        self.lock = lock if lock is not None else nullcontext()

    def try_acquire(self) -> bool:
        with self.lock:
            if sum(self.slots) >= self.limit:
                return False
            self.slots[self.index] += 1
            return True

    def release(self) -> None:
        with self.lock:
            self.slots[self.index] -= 1

    @property
    def workers(self) -> int:
        return len(self.slots)

    def total(self) -> int:
        return sum(self.slots)

    def per_worker(self) -> list[int]:
        return list(self.slots)

"""Session records and the server-wide session count shared by worker processes."""

from __future__ import annotations

import secrets
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from openenv_gym.environment import Environment


def new_session_id() -> str:
    """128 random bits, URL-safe: unguessable, so a session can only be named by who was told."""
    return secrets.token_urlsafe(16)


class Session:
    """One environment instance. `live` while an episode runs; `busy` while a request is in flight."""

    __slots__ = ("env", "id", "last_active", "live", "owner", "task", "timed_out")

    def __init__(self, session_id: str, env: Environment, owner: Any, now: float) -> None:
        self.id = session_id
        self.env = env
        self.owner = owner  # the connection that created it; only it can name the session
        self.live = False
        self.task = None  # the in-flight reset/step, when it had to wait
        self.timed_out = False
        self.last_active = now

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

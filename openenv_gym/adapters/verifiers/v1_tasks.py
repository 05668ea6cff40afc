"""A Verifiers v1 taskset's tasks, read as resets ask for them.

A taskset may never end (`INFINITE = True`: levels generated from a seed), and making a task may cost (a simulation
that finds the task's solution, a file read): tasks are read in order, in a thread, only as far as a reset or a
listing needs, and kept. A taskset that ends is counted when a count is asked for (a seeded choice, the catalog),
and a seed chooses among all its tasks. One that never ends offers its first `max_tasks` (the manifest's), read as
a stream is: a seed s plays task s (mod max_tasks), so seeds 0, 1, 2, ... play tasks in the order they are made and
none is made before it is asked for, and a reset without a seed plays the next task this worker has not yet
played that way. A task is looked up by its id or name only in a taskset that ends, as Verifiers' own
`include(names=...)` refuses to search an endless one.
"""

from __future__ import annotations

import asyncio
import random
import sys
import threading
from collections.abc import Iterator
from typing import Any

from openenv_gym.errors import BadRequestError


class LazyTasks:
    def __init__(self, taskset: Any, endless_limit: int) -> None:
        self.endless = not taskset.bounded
        self.limit = endless_limit if self.endless else sys.maxsize  # tasks offered, and so read at most
        self.read: list[Any] = []
        self.source: Iterator[Any] | None = iter(taskset)  # None once it has ended
        self.reading = threading.Lock()  # one thread advances the taskset's iterator at a time
        self.unseeded = 0  # an endless taskset's next task for a reset without a seed

    def read_to(self, count: int) -> None:
        """Read tasks until `count` are read, the taskset ends or `limit` is reached. Blocking: call it in a thread."""
        with self.reading:
            while self.source is not None and len(self.read) < min(count, self.limit):
                try:
                    self.read.append(next(self.source))
                except StopIteration:
                    self.source = None

    async def _ensure(self, count: int) -> None:
        if len(self.read) < min(count, self.limit) and self.source is not None:
            await asyncio.to_thread(self.read_to, count)

    async def count(self) -> int:
        """How many tasks there are to choose from: every task of a taskset that ends (read now, the first time it
        is asked), the first `limit` of one that does not (none read for it)."""
        if self.endless:
            return self.limit
        await self._ensure(self.limit)
        return len(self.read)

    def seeded_index(self, seed: int | None, count: int) -> int:
        """The task a seeded choice plays (episode/tasks.py asks): a random one of a taskset that ends; the seed's own
        of an endless one, or the next unplayed one without a seed."""
        if not self.endless:
            return random.Random(seed).randrange(count)
        if seed is None:
            index, self.unseeded = self.unseeded, (self.unseeded + 1) % count
            return index
        return seed % count

    async def get(self, index: int) -> Any:
        await self._ensure(index + 1)
        if not 0 <= index < len(self.read):  # (the choice checked its range against the count)
            raise BadRequestError(f"task {index} is out of range ({len(self.read)} tasks)")
        return self.read[index]

    async def window(self, window: range) -> list[Any]:
        """The tasks of a catalog listing's window that exist."""
        await self._ensure(window.stop)
        return self.read[window.start:window.stop]

    async def find(self, name: str) -> int | None:
        """The index of the task whose id or name is `name`, if one has it."""
        if self.endless:
            raise BadRequestError(f"this taskset never ends, so no task is looked up by its id or name ({name!r:.80}): "
                                  "options={'task': i} plays task i")
        await self._ensure(self.limit)
        return next((index for index, task in enumerate(self.read) if name in (task.data.id, task.data.name)), None)

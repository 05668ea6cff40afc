"""The episodes a rollout stream plays, in order: each one's seed and reset options."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator
from typing import Any


class Plan:
    """Hands out the (seed, reset options) of each new episode until `episodes` are handed out or `tasks` run out.
    Episode (or group) n of the plan has seed `seed + n`, the n-th task, and group id "g{n}"; the numbers in
    `skip` (played already: a resumed run) are passed over."""

    def __init__(self, episodes: int | None, tasks: Iterable[dict[str, Any]] | None, seed: int | None,
                 options: dict[str, Any], skip: Collection[int] = ()) -> None:
        self.left = episodes
        self.tasks: Iterator[dict[str, Any]] | None = None if tasks is None else iter(tasks)
        self.seed = seed
        self.options = options
        self.skip = skip
        self.count = 0  # the plan's next number

    def next(self) -> tuple[int | None, dict[str, Any]] | None:
        while True:
            if self.left is not None and self.left <= 0:
                return None
            task: dict[str, Any] = {}
            if self.tasks is not None:
                task = next(self.tasks, None)  # type: ignore[arg-type]
                if task is None:
                    return None
            if self.left is not None:
                self.left -= 1
            number, self.count = self.count, self.count + 1
            if number not in self.skip:
                return (None if self.seed is None else self.seed + number), self.options | task

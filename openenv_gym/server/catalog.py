"""The task catalog of a served environment: splits (with task counts) and tasks.

An environment factory may offer `catalog()` and `tasks(split, window, reveal)` (the ORS and Verifiers
adapters do); for one that does not, the catalog is empty. Trainers list tasks through the client API or
HTTP GET. A task's hidden parts (an ORS task spec, a Verifiers row's answer and info: what observations
keep out of sight) are left out of listings unless the server was started with `reveal_tasks`, since
anyone who reaches the port may list them. A listing holds at most MAX_TASKS_LISTED tasks.
"""

from __future__ import annotations

from typing import Any

from openenv_gym.episode.tasks import resolve_split
from openenv_gym.errors import BadRequestError

MAX_TASKS_LISTED = 1000  # tasks in one listing; page with start and stop


class Catalog:
    def __init__(self, factory: Any, name: str, reveal: bool = False) -> None:
        self.factory = factory
        self.name = name
        self.reveal = reveal

    async def splits(self) -> list[dict[str, Any]]:
        catalog = getattr(self.factory, "catalog", None)
        return list(await catalog()) if catalog is not None else []

    async def tasks(self, split: str | None, start: int | None, stop: int | None) -> dict[str, Any]:
        """{"split", "start", "tasks", "hidden"}: tasks split[start:stop], at most MAX_TASKS_LISTED of them."""
        if getattr(self.factory, "tasks", None) is None:
            raise BadRequestError(f"{self.name} has no task catalog (no splits or tasks)")
        split = await resolve_split(self.factory, self.name, split)
        window = range(await self.factory.num_tasks(split))[start:stop][:MAX_TASKS_LISTED]
        tasks = await self.factory.tasks(split, window, self.reveal)
        return {"split": split, "start": window.start, "tasks": tasks, "hidden": not self.reveal}

"""The task catalog of a served environment: splits (with task counts) and tasks.

An environment factory may offer `catalog()` and `tasks(split, start, stop)` (the ORS adapter does);
for one that does not, the catalog is empty. Trainers list tasks through the client API or HTTP GET;
the policy never sees them (observations and infos carry no task spec unless asked for).
"""

from __future__ import annotations

from typing import Any

from openenv_gym.errors import BadRequestError


class Catalog:
    def __init__(self, factory: Any, name: str) -> None:
        self.factory = factory
        self.name = name

    async def splits(self) -> list[dict[str, Any]]:
        catalog = getattr(self.factory, "catalog", None)
        return list(await catalog()) if catalog is not None else []

    async def tasks(self, split: str | None, start: int | None, stop: int | None) -> tuple[str, list[dict]]:
        tasks = getattr(self.factory, "tasks", None)
        if tasks is None:
            raise BadRequestError(f"{self.name} has no task catalog (no splits or tasks)")
        return await tasks(split, start, stop)

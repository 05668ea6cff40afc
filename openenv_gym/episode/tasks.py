"""Which task a reset plays (named by split and index in the options, or a seeded choice), and what of
it the policy may see.

Shared by every environment kind with a task catalog (ORS classes, the remote ORS client, Verifiers).
"""

from __future__ import annotations

import random
from typing import Any, Protocol

from openenv_gym.errors import BadRequestError


class TaskSource(Protocol):
    async def splits(self) -> list[dict[str, str]]: ...

    async def num_tasks(self, split: str) -> int: ...


async def resolve_split(source: TaskSource, name: str, split: Any) -> str:
    names = [s["name"] for s in await source.splits()]
    if not names:
        raise BadRequestError(f"{name} has no splits")
    if split is None:
        return names[0]
    if split not in names:
        raise BadRequestError(f"unknown split {split!r}; splits: {', '.join(names)}")
    return split


async def choose_task(source: TaskSource, name: str, seed: int | None, options: dict) -> dict[str, Any]:
    """{"task_spec": ...} or {"split", "index"} for a reset: from the options, or a seeded choice from
    the first split (or the split named in the options)."""
    if "task_spec" in options:
        if not isinstance(options["task_spec"], dict):
            raise BadRequestError("option task_spec must be an object")
        return {"task_spec": options["task_spec"]}
    split = await resolve_split(source, name, options.get("split"))
    count = await source.num_tasks(split)
    index = options.get("index")
    if index is None:
        if count == 0:
            raise BadRequestError(f"split {split!r} has no tasks")
        index = random.Random(seed).randrange(count)
    if type(index) is not int or not 0 <= index < count:
        raise BadRequestError(f"index {index!r} is out of range for split {split!r} ({count} tasks)")
    return {"split": split, "index": index}


async def splits_with_counts(source: TaskSource) -> list[dict[str, Any]]:
    """The catalog a factory offers: its splits, each with its number of tasks."""
    return [split | {"num_tasks": await source.num_tasks(split["name"])} for split in await source.splits()]


# Reset options that ask for the hidden parts of a task (ORS task specs, Verifiers answers) in info.
REVEAL_OPTIONS = ("expose_task", "expose_answer")


def reveals_hidden(options: dict[str, Any]) -> bool:
    """Whether a reset asked to see the task's hidden parts (often the answer) in info. Whatever a policy must
    not see is added to info only behind this check, so it never reaches an observation or info by accident."""
    return any(options.get(name) for name in REVEAL_OPTIONS)

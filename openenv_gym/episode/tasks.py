"""Which task a reset plays, and what of it the policy may see.

A reset names its task by `task` (an index, or the id or name a task carries), or by `split` and `index`, or
lets reset's seed choose one (the same seed, the same task); `split` alone narrows the choice to that split.
Shared by every environment kind with a task catalog (ORS classes, the remote ORS client, Verifiers, agent
programs, AWM worlds).
"""

from __future__ import annotations

import random
import weakref
from typing import Any, Protocol

from openenv_gym.errors import BadRequestError

TASK_OPTIONS = ("task", "split", "index")
TASK_SPEC = "task_spec"  # the option that gives the task itself (its spec, its data), in kinds that can play one
NAME_KEYS = ("id", "name")  # what a task may be named by, besides its index
NAME_SCAN_WINDOW = 512  # tasks read at a time while looking for a name


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
    if TASK_SPEC in options:
        if not isinstance(options[TASK_SPEC], dict):
            raise BadRequestError(f"option {TASK_SPEC} must be an object")
        return {TASK_SPEC: options[TASK_SPEC]}
    split = await resolve_split(source, name, options.get("split"))
    if "task" in options:
        if "index" in options:
            raise BadRequestError("options task and index both name a task: give one of them")
        return {"split": split, "index": await task_index(source, split, options["task"])}
    count = await source.num_tasks(split)
    index = options.get("index")
    if index is None:
        if count == 0:
            raise BadRequestError(f"split {split!r} has no tasks")
        seeded = getattr(source, "seeded_index", None)  # a stream of tasks chooses its own way (v1_tasks.py)
        index = seeded(seed, count) if seeded is not None else random.Random(seed).randrange(count)
    if type(index) is not int or not 0 <= index < count:
        raise BadRequestError(f"index {index!r} is out of range for split {split!r} ({count} tasks)")
    return {"split": split, "index": index}


async def task_index(source: Any, split: str, task: Any) -> int:
    """The index of the task that option `task` names in `split`: an index, or a task's id or name (a source
    may look names up itself: `find_task(split, name)`; else its catalog listing is searched)."""
    if type(task) is int:
        count = await source.num_tasks(split)
        if not 0 <= task < count:
            raise BadRequestError(f"task {task} is out of range for split {split!r} ({count} tasks)")
        return task
    if not isinstance(task, str):
        raise BadRequestError(f"option task must be a task's index, id or name, got {task!r:.80}")
    find = getattr(source, "find_task", None)
    index = await find(split, task) if find is not None else await _named(source, split, task)
    if index is None:
        raise BadRequestError(f"no task of split {split!r} has the id or name {task!r:.80}; "
                              "options={'task': i} picks one by index")
    return index


_NAMES: weakref.WeakKeyDictionary[Any, dict[str, dict[str, int]]] = weakref.WeakKeyDictionary()


async def _named(source: Any, split: str, name: str) -> int | None:
    """The index of the task named `name`, from the source's catalog listing, read once per split and kept."""
    names = _NAMES.setdefault(source, {}).get(split)
    if names is None:
        names = {}
        listing = getattr(source, "tasks", None)
        count = await source.num_tasks(split) if listing is not None else 0
        for start in range(0, count, NAME_SCAN_WINDOW):
            window = range(start, min(start + NAME_SCAN_WINDOW, count))
            for index, task in zip(window, await listing(split, window, True), strict=False):
                for key in NAME_KEYS:
                    value = task.get(key) if isinstance(task, dict) else None
                    if isinstance(value, str | int) and not isinstance(value, bool):
                        names.setdefault(str(value), index)
        _NAMES[source][split] = names
    return names.get(name)


async def splits_with_counts(source: TaskSource) -> list[dict[str, Any]]:
    """The catalog a factory offers: its splits, each with its number of tasks."""
    return [split | {"num_tasks": await source.num_tasks(split["name"])} for split in await source.splits()]


# Reset options that ask for the hidden parts of a task (ORS task specs, Verifiers answers) in info.
REVEAL_OPTIONS = ("expose_task", "expose_answer")


def reveals_hidden(options: dict[str, Any]) -> bool:
    """Whether a reset asked to see the task's hidden parts (often the answer) in info. Whatever a policy must
    not see is added to info only behind this check, so it never reaches an observation or info by accident."""
    return any(options.get(name) for name in REVEAL_OPTIONS)

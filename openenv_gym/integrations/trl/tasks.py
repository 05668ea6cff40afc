"""Which task a training row plays, for both TRL paths, and a dataset of rows that name tasks."""

from __future__ import annotations

import zlib
from typing import Any

import orjson

TASK_COLUMNS = ("task", "split", "index", "task_spec")


def task_of_row(row: dict[str, Any]) -> tuple[int | None, dict[str, Any]]:
    """(seed, reset options) for a dataset row: its `seed`, `task`, `split` + `index` and `task_spec` columns. A row
    with none of them plays the task its prompt hashes to, so the rows of one GRPO group share a task."""
    options = {key: row[key] for key in TASK_COLUMNS if row.get(key) is not None}
    seed = row.get("seed")
    if seed is None and not options:
        seed = zlib.crc32(orjson.dumps(row.get("prompt"), option=orjson.OPT_SORT_KEYS))
    return (None if seed is None else int(seed)), options


def task_of_prompt(prompt: Any) -> tuple[int | None, dict[str, Any]]:
    """(seed, reset options) for a prompt, as the rollout function sees it (without the row's other columns):
    the `task` a message of it carries ({"seed": ...} or {"split": ..., "index": ...}, as `dataset()` writes), or
    the task its text hashes to."""
    if isinstance(prompt, list):
        for message in reversed(prompt):
            task = message.get("task") if isinstance(message, dict) else None
            if isinstance(task, dict) and any(value is not None for value in task.values()):
                return task_of_row(task)
    return task_of_row({"prompt": prompt})


def dataset(size: int, *, split: str | None = None, seed: int = 0, prompt: str = "", sampled: bool = False) -> Any:
    """A train dataset of `size` rows, each naming its task: tasks 0..size-1 of `split`, or seeds seed, seed+1,
    ... The prompt is a user message (default empty) that the env's first observation is appended to. The task is
    both in the row's columns (for environment_factory's reset) and in the message (for the rollout function,
    which sees only prompts); chat templates leave the message's `task` out. `sampled`: rows that name no task,
    only a slot that tells them apart, for a task sampler to choose each group's task (`sampler=`)."""
    from datasets import Dataset

    if sampled:
        tasks: list[dict[str, Any]] = [{"slot": i} for i in range(size)]
    elif split is not None:
        tasks = [{"split": split, "index": i} for i in range(size)]
    else:
        tasks = [{"seed": seed + i} for i in range(size)]
    return Dataset.from_list([{"prompt": [{"role": "user", "content": prompt, "task": task}], **task}
                              for task in tasks])

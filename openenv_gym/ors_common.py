"""ORS semantics shared by the in-process adapter and the HTTP client: blocks, tool outputs, task choice.

Works on plain dicts (ORS's JSON shapes), so neither SDK is needed to use it.
"""

from __future__ import annotations

import random
from typing import Any, Protocol

from openenv_gym.environment import StepResult, invalid_action
from openenv_gym.errors import BadRequestError

SPLIT_TYPES = ("train", "validation", "test")
EMPTY_SCHEMA = {"type": "object", "properties": {}}


def render_blocks(blocks: Any) -> tuple[str, list[dict]]:
    """Observation text from ORS blocks; image blocks are kept aside (for info)."""
    texts, images = [], []
    for block in blocks or ():
        if block.get("type") == "text":
            texts.append(block["text"])
        elif block.get("type") == "image":
            images.append({"data": block["data"], "mimeType": block["mimeType"]})
            texts.append("[image]")
    return "\n".join(texts), images


def tool_spec(spec: dict) -> dict:
    """An ORS ToolSpec {name, description, input_schema} as a tool of ours {name, description, parameters}."""
    return {"name": spec["name"], "description": spec.get("description", ""),
            "parameters": spec.get("input_schema") or EMPTY_SCHEMA}


def split_entry(split: Any) -> dict[str, str]:
    if isinstance(split, str):
        return {"name": split, "type": split if split in SPLIT_TYPES else "validation"}
    if isinstance(split, dict):
        return {"name": split["name"], "type": split.get("type", "validation")}
    return {"name": split.name, "type": str(getattr(split.type, "value", split.type))}


def step_from_tool_result(ran: dict, truncated: bool) -> StepResult:
    """A RunToolOutput ({ok, output} or {ok: false, error, reason}) as a step: reward None -> 0.0 (raw in info),
    finished -> terminated; a refused call is an error observation and the episode goes on."""
    if not ran.get("ok"):
        result = invalid_action(str(ran.get("error", "the tool call failed")), truncated=truncated)
        result.info["reason"] = ran.get("reason")
        return result
    output = ran["output"]
    obs, images = render_blocks(output.get("blocks"))
    info: dict[str, Any] = {"reward_raw": output.get("reward"), "metadata": output.get("metadata")}
    if images:
        info["images"] = images
    reward = 0.0 if output.get("reward") is None else float(output["reward"])
    finished = bool(output.get("finished"))
    return StepResult(obs, reward, finished, truncated and not finished, info)


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

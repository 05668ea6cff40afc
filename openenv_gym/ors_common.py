"""ORS semantics shared by the in-process adapter and the HTTP client: blocks, tool outputs, task choice.

Works on plain dicts (ORS's JSON shapes), so neither SDK is needed to use it.
"""

from __future__ import annotations

from typing import Any

from openenv_gym.environment import StepResult, invalid_action

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

"""OpenEnv's wire shapes (openenv 0.10.0), sans I/O, shared by the transport that drives OpenEnv servers
(client/openenv.py) and the adapter that serves imported OpenEnv environments (adapters/openenv.py), so one
environment plays the same steps either way.

An OpenEnv observation payload is `{"observation": {...}, "reward": r | None, "done": bool, "metadata"?: {...}}`.
Its text is the observation's `text` field; for an MCP tool call, the text of the tool's result (or "Error: ..."
when the call failed); else the observation as JSON. The whole observation is in info["observation"].
Actions: MCP environments take tool calls (`{"type": "call_tool", "tool_name", "arguments"}`); others take an
object of their Action model, or text when that model has a single text field.
"""

from __future__ import annotations

from typing import Any

import orjson

from openenv_gym.episode.results import ResetResult, StepResult, reward_of
from openenv_gym.episode.toolcalls import find_tool_call

EMPTY_SCHEMA = {"type": "object", "properties": {}}
ACTION_BOOKKEEPING = {"metadata", "type"}  # fields of every OpenEnv action, never the one a text goes to
STATE_COUNTS = ("episode_id", "step_count")  # State fields a session keeps itself; the rest are the env's extras


def state_extras(state: Any) -> dict[str, Any]:
    """An OpenEnv State (as JSON) beyond its episode id and step count: what the environment tells of itself."""
    return {key: value for key, value in state.items() if key not in STATE_COUNTS} if isinstance(state, dict) else {}


def tool_of(tool: dict[str, Any]) -> dict[str, Any]:
    """An OpenEnv / MCP Tool ({name, description, input_schema or inputSchema}) as a tool of ours."""
    schema = tool.get("input_schema") or tool.get("inputSchema") or EMPTY_SCHEMA
    return {"name": tool["name"], "description": tool.get("description") or "", "parameters": schema}


def is_tool_schema(action_schema: dict[str, Any]) -> bool:
    """Whether an environment's action schema (from /schema) is MCP's CallToolAction: a tool-calling env."""
    properties = action_schema.get("properties") or {}
    return "tool_name" in properties and "arguments" in properties


def text_field(action_schema: dict[str, Any]) -> str | None:
    """The field a text action fills: the action model's one required string field (or its one string field)."""
    properties = {name: spec for name, spec in (action_schema.get("properties") or {}).items()
                  if name not in ACTION_BOOKKEEPING}
    strings = [name for name, spec in properties.items() if isinstance(spec, dict) and spec.get("type") == "string"]
    required = [name for name in action_schema.get("required") or () if name in properties]
    if len(required) == 1 and required[0] in strings:
        return required[0]
    return strings[0] if len(strings) == 1 and not required else None


def wire_action(action: Any, tools: list[dict] | None, text_to: str | None) -> dict[str, Any] | str:
    """The OpenEnv action an action of ours makes, or why it makes none (an invalid-action message).
    tools: a tool-calling env's tools (None: the env takes objects); text_to: the field text goes to."""
    if tools is not None:
        if isinstance(action, dict) and action.get("type") == "call_tool":  # OpenEnv's own CallToolAction shape
            action = {"name": action.get("tool_name"), "arguments": action.get("arguments") or {}}
        call = find_tool_call(action, [t["name"] for t in tools])
        if isinstance(call, str):
            return call
        return {"type": "call_tool", "tool_name": call["name"], "arguments": call["arguments"]}
    if isinstance(action, dict):
        return action
    if text_to is None:
        return "this environment takes an action object (see its action schema in info or /schema), not text"
    return {text_to: action}


def observation_text(observation: dict[str, Any]) -> str:
    text = observation.get("text")
    if isinstance(text, str):
        return text
    error = observation.get("error")
    if isinstance(error, dict) and error.get("message"):
        return f"Error: {error['message']}"
    if "tool_name" in observation:
        return _result_text(observation.get("result"))
    return orjson.dumps({k: v for k, v in observation.items() if k != "metadata"},
                        option=orjson.OPT_SORT_KEYS).decode()


def _result_text(result: Any) -> str:
    """The text of an MCP tool result: its text content, else its data, else its JSON."""
    if isinstance(result, str):
        return result
    if isinstance(result, dict):
        content = result.get("content")
        if isinstance(content, list):
            texts = [item["text"] for item in content if isinstance(item, dict) and isinstance(item.get("text"), str)]
            if texts:
                return "\n".join(texts)
        if isinstance(result.get("data"), str):
            return result["data"]
    return orjson.dumps(result, option=orjson.OPT_SORT_KEYS).decode()


def _info(payload: dict[str, Any]) -> dict[str, Any]:
    observation = payload.get("observation") or {}
    info: dict[str, Any] = {"observation": observation}
    metadata = payload.get("metadata") or observation.get("metadata")
    if metadata:
        info["metadata"] = metadata
    return info


def reset_from_payload(payload: dict[str, Any]) -> ResetResult:
    return ResetResult(observation_text(payload.get("observation") or {}), _info(payload))


def step_from_payload(payload: dict[str, Any]) -> StepResult:
    """An observation payload as a step: `done` terminates (OpenEnv has no truncation; the step limit is ours)."""
    info = _info(payload)
    reward = reward_of(payload.get("reward"), info)
    return StepResult(observation_text(payload.get("observation") or {}), reward, bool(payload.get("done")), False,
                      info)

"""What OpenEnv's messages carry (openenv 0.10.0), sans I/O, both directions: actions (ours as OpenEnv's and
back), observation payloads (as steps, and our steps as payloads), tools, state, and the /schema and /metadata
answers. The messages and frames around them are protocol/openenv.py's. Shared by the transport that drives
OpenEnv servers (client/openenv.py), the front end that serves our environments to OpenEnv's clients
(server/openenv_ws.py) and the adapter that serves imported OpenEnv environments (adapters/openenv.py), so one
environment plays the same steps served either way.

An observation payload is `{"observation": {...}, "reward": r | None, "done": bool, "metadata"?: {...}}`.
Its text is the observation's `text` field; for an MCP tool call, the text of the tool's result (or "Error: ..."
when the call failed); else the observation as JSON. The whole observation is in info["observation"].
An environment of ours (not an OpenEnv one) shows OpenEnv's clients the observation
`{"text", "info", "terminated", "truncated", "metadata"}`, with `reward` and `done` next to it.
Actions: MCP environments take tool calls (`{"type": "call_tool", "tool_name", "arguments"}`); others take an
object of their Action model, or text when that model has a single text field.
"""

from __future__ import annotations

from typing import Any

import orjson

from openenv_gym.episode.results import ResetResult, StepResult, reward_of
from openenv_gym.episode.toolcalls import find_tool_call

CALL_TOOL, LIST_TOOLS = "call_tool", "list_tools"  # the `type` of OpenEnv's MCP actions
ACTION_BOOKKEEPING = {"metadata", "type"}  # fields of every OpenEnv action, never the one a text goes to
STATE_COUNTS = ("episode_id", "step_count")  # State fields a session keeps itself; the rest are the env's extras


def state_extras(state: Any) -> dict[str, Any]:
    """An OpenEnv State (as JSON) beyond its episode id and step count: what the environment tells of itself."""
    return {key: value for key, value in state.items() if key not in STATE_COUNTS} if isinstance(state, dict) else {}


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
        if isinstance(action, dict) and action.get("type") == CALL_TOOL:  # OpenEnv's own CallToolAction: as it is,
            return action  # so the environment answers an unknown tool as OpenEnv's server lets it
        call = find_tool_call(action, [t["name"] for t in tools])
        if isinstance(call, str):
            return call
        return {"type": CALL_TOOL, "tool_name": call["name"], "arguments": call["arguments"]}
    if isinstance(action, dict):
        return action
    if text_to is None:  # (a model's text reply that writes the object: how a language model gives one)
        written = _json_object(action)
        if written is None:
            return ("this environment takes an action object (see its action schema in info or /schema), not text; "
                    "text that is a JSON object is taken as one")
        return written
    return {text_to: action}


def _json_object(text: Any) -> dict[str, Any] | None:
    """The JSON object a text is, fenced in a code block or not; None if it is none."""
    if not isinstance(text, str):
        return None
    stripped = text.strip().removeprefix("```json").removeprefix("```").removesuffix("```").strip()
    try:
        value = orjson.loads(stripped)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


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
    observation = payload.get("observation") or {}
    if _is_ours(observation):
        return ResetResult(observation["text"], observation["info"])
    return ResetResult(observation_text(observation), _info(payload))


def step_from_payload(payload: dict[str, Any]) -> StepResult:
    """An observation payload as a step: `done` terminates (OpenEnv has no truncation; the step limit is ours),
    unless the observation is ours (payload_of), which says which of the two ended the episode."""
    observation = payload.get("observation") or {}
    if _is_ours(observation):
        return StepResult(observation["text"], reward_of(payload.get("reward"), observation["info"]),
                          observation["terminated"], observation["truncated"], observation["info"])
    info = _info(payload)
    reward = reward_of(payload.get("reward"), info)
    return StepResult(observation_text(observation), reward, bool(payload.get("done")), False, info)


def _is_ours(observation: dict[str, Any]) -> bool:
    """Whether an observation is the one an environment of ours shows OpenEnv's clients (payload_of)."""
    return (type(observation.get("text")) is str and type(observation.get("info")) is dict
            and type(observation.get("terminated")) is bool and type(observation.get("truncated")) is bool)


def payload_of(result: StepResult | ResetResult, own_payload: bool) -> dict[str, Any]:
    """The observation payload of one of our results (step_from_payload reads it back). `own_payload`: the
    environment is an OpenEnv one, whose own payload is in the info (as _info keeps it); else our observation."""
    terminated, truncated, reward = (result.terminated, result.truncated, result.reward) \
        if isinstance(result, StepResult) else (False, False, None)
    info = result.info
    if own_payload and isinstance(info.get("observation"), dict):
        payload = {"observation": info["observation"], "reward": info.get("reward_raw", reward),
                   "done": terminated or truncated}
        if info.get("metadata"):
            payload["metadata"] = info["metadata"]
        return payload
    return {"observation": {"text": result.obs, "info": info, "terminated": terminated, "truncated": truncated,
                            "metadata": {}},
            "reward": reward, "done": terminated or truncated}


def schema_of(description: dict[str, Any], tools: list[dict[str, Any]]) -> dict[str, Any]:
    """GET /schema of an environment: an OpenEnv environment's own models (its description holds their schemas);
    for ours, the actions, observations and state this protocol takes and gives."""
    own = description.get("observation_schema")
    action_schema = description.get("action_schema")
    if own is not None and action_schema is not None:
        schema = {"action": action_schema, "observation": own, "state": description.get("state_schema") or {}}
        if description.get("reset_observation_schema"):
            schema["reset_observation"] = description["reset_observation_schema"]
        return schema
    tool_call = {"type": "object", "required": ["type", "tool_name"], "properties": {
        "type": {"const": CALL_TOOL}, "tool_name": {"enum": [t["name"] for t in tools]},
        "arguments": {"type": "object"}}}
    text = {"type": "object", "required": ["message"], "properties": {"message": {"type": "string"}}}
    listing = {"type": "object", "required": ["type"], "properties": {"type": {"const": LIST_TOOLS}}}
    anything = {"oneOf": [text, {"type": "object"}]}
    action = {"oneOf": [tool_call, listing, text]} if tools else (action_schema or anything)
    observation = {"type": "object", "properties": {
        "text": {"type": "string"}, "info": {"type": "object"}, "terminated": {"type": "boolean"},
        "truncated": {"type": "boolean"}, "metadata": {"type": "object"}}}
    state = {"type": "object", "properties": {
        "episode_id": {"type": ["string", "null"]}, "step_count": {"type": "integer", "minimum": 0},
        "running": {"type": "boolean"}, "max_steps": {"type": ["integer", "null"]}}}
    return {"action": action, "observation": observation, "state": state}


def metadata_of(description: dict[str, Any]) -> dict[str, Any]:
    """GET /metadata: OpenEnv's EnvironmentMetadata of an environment."""
    return {"name": description.get("name", ""), "description": description.get("description", ""),
            "readme_content": None, "version": None, "author": None, "documentation_url": None}


def state_of(state: dict[str, Any], own_state: bool) -> dict[str, Any]:
    """OpenEnv's State for a session's state of ours (state_extras reads the extras back): episode_id and
    step_count, the environment's extras next to them, and, for an environment of ours, whether the episode runs
    and its step limit."""
    ours = {"episode_id": state.get("episode_id"), "step_count": state.get("steps", 0)}
    if not own_state:
        ours |= {"running": state.get("running", False), "max_steps": state.get("max_steps")}
    return state.get("extras", {}) | ours

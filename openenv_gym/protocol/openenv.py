"""OpenEnv's `/ws` protocol (openenv 0.10.0), sans I/O, both directions: the messages a client sends and the
server reads, the frames the server answers with and the client reads, and OpenEnv's error codes as ours. What
the messages carry (actions, observation payloads, tools, state, schemas) is protocol/openenv_payloads.py's;
MCP's JSON-RPC shapes are protocol/mcp.py's. Client (client/openenv.py) and server (server/openenv_ws.py) build
and read every message here, so they cannot disagree.

    {"type": "reset", "data": {"seed": 3, "episode_id": "e1", <reset options>}}  -> {"type": "observation", ...}
    {"type": "step", "data": <action>}                                          -> {"type": "observation", ...}
    {"type": "state"}                                                           -> {"type": "state", ...}
    {"type": "mcp", "data": <JSON-RPC request>}                                 -> {"type": "mcp", ...}
    {"type": "close"}                                                           -> the socket closes (1000)
    errors: {"type": "error", "data": {"message", "code"}}
"""

from __future__ import annotations

from typing import Any

import orjson

from openenv_gym.episode.results import Action
from openenv_gym.errors import BadRequestError, CapacityError, EnvError, InvalidActionError, ProtocolError
from openenv_gym.protocol.openenv_payloads import CALL_TOOL, LIST_TOOLS

RESET, STEP, STATE, MCP, CLOSE = "reset", "step", "state", "mcp", "close"  # what a client sends
OBSERVATION, ERROR = "observation", "error"  # what a server answers, besides STATE and MCP frames
INVALID_JSON, UNKNOWN_TYPE, VALIDATION_ERROR = "INVALID_JSON", "UNKNOWN_TYPE", "VALIDATION_ERROR"
EXECUTION_ERROR, CAPACITY_REACHED, SESSION_ERROR = "EXECUTION_ERROR", "CAPACITY_REACHED", "SESSION_ERROR"
CLIENT_MISTAKES = frozenset({INVALID_JSON, UNKNOWN_TYPE, VALIDATION_ERROR})  # codes of what the client sent wrong
RESET_KEYS = ("seed",)  # given to reset as such; every other key of its data (episode_id too) is a reset option


# -- messages: built by a client, read by the server -------------------------------------------------------

class WireError(Exception):
    """What an OpenEnv server answers with an error frame: {"type": "error", "data": {"message", "code"}}."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code

    def frame(self) -> dict[str, Any]:
        return error_frame(self.code, str(self))


def reset_message(seed: int | None, options: dict[str, Any]) -> dict[str, Any]:
    return {"type": RESET, "data": options | ({"seed": seed} if seed is not None else {})}


def step_message(action: dict[str, Any]) -> dict[str, Any]:
    return {"type": STEP, "data": action}


def list_tools_message() -> dict[str, Any]:
    """A step that lists an MCP environment's tools (OpenEnv answers it without a reset)."""
    return step_message({"type": LIST_TOOLS})


def state_message() -> dict[str, Any]:
    return {"type": STATE}


def close_message() -> dict[str, Any]:
    return {"type": CLOSE}


def mcp_message(request: dict[str, Any]) -> dict[str, Any]:
    return {"type": MCP, "data": request}


def read_message(raw: str | bytes) -> dict[str, Any]:
    """A client's message; WireError if it cannot be one."""
    try:
        message = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise WireError(INVALID_JSON, f"Invalid JSON: {exc}") from None
    if not isinstance(message, dict) or not isinstance(message.get("type"), str):
        raise WireError(VALIDATION_ERROR, "Invalid message: an object with a string 'type' is expected")
    if message["type"] not in (RESET, STEP, STATE, MCP, CLOSE):
        raise WireError(UNKNOWN_TYPE, f"Unknown message type: {message['type']}")
    return message


def reset_arguments(message: dict[str, Any]) -> tuple[int | None, dict[str, Any] | None]:
    """(seed, reset options) of a reset message; WireError if they do not fit."""
    data = message.get("data") or {}
    if not isinstance(data, dict):
        raise WireError(VALIDATION_ERROR, "reset 'data' must be an object")
    seed = data.get("seed")
    if seed is not None and (type(seed) is not int or seed < 0):
        raise WireError(VALIDATION_ERROR, "seed must be a non-negative integer")
    return seed, {key: value for key, value in data.items() if key not in RESET_KEYS} or None


def step_data(message: dict[str, Any]) -> dict[str, Any]:
    """The action data of a step message; WireError if it has none."""
    data = message.get("data")
    if not isinstance(data, dict):
        raise WireError(VALIDATION_ERROR, "step 'data' must be an object: the action")
    return data


def action_of(data: dict[str, Any]) -> Action:
    """Our action for an OpenEnv action (the inverse of wire_action): a tool call, text (`{"message": ...}` or
    `{"text": ...}`), or the object as it is. WireError if a call_tool action is malformed."""
    data = {key: value for key, value in data.items() if key != "metadata"}
    if data.get("type") == CALL_TOOL:
        arguments = data.get("arguments", {})
        if not isinstance(data.get("tool_name"), str):
            raise WireError(VALIDATION_ERROR, "a call_tool action needs 'tool_name' (a string)")
        if not isinstance(arguments, dict):
            raise WireError(VALIDATION_ERROR, "a call_tool action's 'arguments' must be an object")
        return {"name": data["tool_name"], "arguments": arguments}
    for key in ("message", "text"):
        if set(data) == {key} and isinstance(data[key], str):
            return data[key]
    return data


def is_list_tools(data: dict[str, Any]) -> bool:
    return data.get("type") == LIST_TOOLS


# -- frames: built by the server, read by a client ---------------------------------------------------------

def observation_frame(payload: dict[str, Any]) -> dict[str, Any]:
    return {"type": OBSERVATION, "data": payload}


def state_frame(state: dict[str, Any]) -> dict[str, Any]:
    return {"type": STATE, "data": state}


def mcp_frame(response: dict[str, Any]) -> dict[str, Any]:
    return {"type": MCP, "data": response}


def error_frame(code: str, message: str) -> dict[str, Any]:
    return {"type": ERROR, "data": {"message": message, "code": code}}


def code_of(error: ProtocolError) -> str:
    """OpenEnv's code for one of our errors: what the client sent was wrong, or what the environment did."""
    if isinstance(error, CapacityError):
        return CAPACITY_REACHED
    if isinstance(error, BadRequestError | InvalidActionError):
        return VALIDATION_ERROR
    return EXECUTION_ERROR


def error_of(code: Any, message: str) -> ProtocolError:
    """One of our errors for OpenEnv's code (the inverse of code_of)."""
    if code == CAPACITY_REACHED:
        return CapacityError(message)
    if code in CLIENT_MISTAKES:
        return BadRequestError(message)
    return EnvError(message)


def frame_data(frame: dict[str, Any]) -> dict[str, Any]:
    """The data of an answer frame; an error frame raises its error (error_of)."""
    data = frame.get("data") or {}
    if frame.get("type") != ERROR:
        return data
    raise error_of(data.get("code"), f"the OpenEnv server answered {data.get('code')}: {data.get('message')}")

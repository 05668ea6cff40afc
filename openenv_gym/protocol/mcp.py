"""MCP's JSON-RPC 2.0 shapes, as OpenEnv's servers speak them (`POST /mcp`, and `mcp` frames on `/ws`), sans I/O:
MCP's initialize, tools/list and tools/call, and OpenEnv's session extensions (openenv/session/create and
openenv/session/close; other calls name their session in params.session_id).

A tool of ours ({name, description, parameters}) is an MCP Tool ({name, description, inputSchema}). A tool call's
answer carries the step: its text as content, `isError` when the environment reported an error, and the reward,
the episode's end and the info as structuredContent.
"""

from __future__ import annotations

from typing import Any

from openenv_gym.episode.results import StepResult
from openenv_gym.protocol.tool_specs import EMPTY_SCHEMA

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND = -32700, -32600, -32601
INVALID_PARAMS, INTERNAL_ERROR, SERVER_ERROR = -32602, -32603, -32000
PROTOCOL_VERSION = "2025-06-18"  # answered to an initialize that names none

INITIALIZE, TOOLS_LIST, TOOLS_CALL = "initialize", "tools/list", "tools/call"
SESSION_CREATE, SESSION_CLOSE = "openenv/session/create", "openenv/session/close"


class JsonRpcError(Exception):
    """A request that gets a JSON-RPC error answer."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


# -- requests: built by a client, read by the server ----------------------------------------------------

def request(rid: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": params or {}}


def tool_call_request(rid: Any, name: str, arguments: dict[str, Any], session_id: str | None = None) -> dict:
    params: dict[str, Any] = {"name": name, "arguments": arguments}
    if session_id is not None:
        params["session_id"] = session_id
    return request(rid, TOOLS_CALL, params)


def method_of(message: Any) -> tuple[Any, str, dict[str, Any]]:
    """(id, method, params) of a request; JsonRpcError(INVALID_REQUEST) if it is not one."""
    if not isinstance(message, dict) or not isinstance(message.get("method"), str):
        raise JsonRpcError(INVALID_REQUEST, "Invalid Request: a JSON-RPC 2.0 object with a 'method' is expected")
    params = message.get("params") or {}
    return message.get("id"), message["method"], params if isinstance(params, dict) else {}


def tool_call_of(params: dict[str, Any]) -> dict[str, Any]:
    """A tools/call's params as a tool call of ours, {name, arguments}; JsonRpcError(INVALID_PARAMS) if they are not
    one."""
    arguments = params.get("arguments") or {}
    if not isinstance(params.get("name"), str) or not isinstance(arguments, dict):
        raise JsonRpcError(INVALID_PARAMS, "tools/call needs params {'name': <tool>, 'arguments': {...}}")
    return {"name": params["name"], "arguments": arguments}


def session_of(params: dict[str, Any]) -> Any:
    """The OpenEnv session a request names (None: none)."""
    return params.get("session_id")


# -- answers: built by the server, read by a client ------------------------------------------------------

def result(rid: Any, value: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "result": value}


def error(rid: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message, "data": None}}


def initialized(rid: Any, asked_version: Any, server_name: str) -> dict[str, Any]:
    return result(rid, {"protocolVersion": asked_version or PROTOCOL_VERSION,
                        "capabilities": {"tools": {"listChanged": False}},
                        "serverInfo": {"name": server_name, "version": "openenv-gym"}})


def mcp_tool(tool: dict[str, Any]) -> dict[str, Any]:
    """A tool of ours as an MCP Tool (tool_specs.as_tool reads it back)."""
    return {"name": tool["name"], "description": tool.get("description", ""),
            "inputSchema": tool.get("parameters") or EMPTY_SCHEMA}


def tools_listed(rid: Any, tools: list[dict[str, Any]]) -> dict[str, Any]:
    return result(rid, {"tools": tools})


def tool_called(rid: Any, step: StepResult) -> dict[str, Any]:
    """The answer to a tools/call: the step's text, whether the environment reported an error, and the step."""
    return result(rid, {"content": [{"type": "text", "text": step.obs}], "isError": "error" in step.info,
                        "data": step.obs, "structuredContent": {
                            "reward": step.reward, "terminated": step.terminated, "truncated": step.truncated,
                            "info": step.info}})


def step_of_tool_result(value: dict[str, Any]) -> StepResult:
    """A tools/call result of tool_called, as the step it carries."""
    step = value.get("structuredContent") or {}
    return StepResult(value.get("data", ""), step.get("reward", 0.0), bool(step.get("terminated")),
                      bool(step.get("truncated")), step.get("info") or {})


def session_created(rid: Any, session_id: str) -> dict[str, Any]:
    return result(rid, {"session_id": session_id})


def session_closed(rid: Any, closed: bool) -> dict[str, Any]:
    return result(rid, {"closed": closed})

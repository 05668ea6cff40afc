"""OpenEnv's `/ws` protocol (openenv 0.10.0), a second front end over the session core: OpenEnv's own clients
(`GenericEnvClient`, `MCPToolClient`, ...) play any environment this server serves.

One socket is one session, as in OpenEnv, but a socket is a coroutine here, not a thread: a worker holds
thousands of them. Each socket carries one request and one answer at a time (OpenEnv's messages carry no id):

    {"type": "reset", "data": {"seed": 3, "episode_id": "e1", <reset options>}}  -> {"type": "observation", ...}
    {"type": "step", "data": <action>}                                          -> {"type": "observation", ...}
    {"type": "state"}                                                           -> {"type": "state", ...}
    {"type": "mcp", "data": <JSON-RPC tools/list or tools/call>}                -> {"type": "mcp", ...}
    {"type": "close"}                                                           -> the socket closes (1000)

An action is a tool call as OpenEnv's MCP actions write it (`{"type": "call_tool", "tool_name", "arguments"}`;
`{"type": "list_tools"}` lists the tools without stepping), text (`{"message": "..."}` or `{"text": "..."}`),
or any other object, given to the environment as it is. An observation carries the text and the info:
`{"text", "info", "terminated", "truncated", "metadata"}`, with `reward` and `done` next to it. Errors are
OpenEnv's: `{"type": "error", "data": {"message", "code"}}` with INVALID_JSON, UNKNOWN_TYPE,
VALIDATION_ERROR, EXECUTION_ERROR or CAPACITY_REACHED; the socket and its session go on after each.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qs, urlsplit

import orjson
from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

from openenv_gym.errors import (
    BadRequestError,
    CapacityError,
    InvalidActionError,
    NoEpisodeError,
    ProtocolError,
    UnauthorizedError,
    UnknownSessionError,
)
from openenv_gym.server.core import SessionCore
from openenv_gym.server.frames import FrameWatch
from openenv_gym.server.http import authorization_refusal
from openenv_gym.server.http_post import NotJson
from openenv_gym.server.sessions import Owner

OPENENV_PATH = "/ws"
RESET_KEYS = ("seed",)  # given to reset as such; every other key (episode_id too) is a reset option
JSONRPC_PARSE_ERROR, JSONRPC_INVALID_REQUEST, JSONRPC_METHOD_NOT_FOUND = -32700, -32600, -32601
JSONRPC_INVALID_PARAMS, JSONRPC_INTERNAL, JSONRPC_SERVER_ERROR = -32602, -32603, -32000
MCP_PROTOCOL_VERSION = "2025-06-18"


class OpenEnvError(Exception):
    """An error frame to answer with: {"type": "error", "data": {"message", "code"}}."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code

    def frame(self) -> dict:
        return {"type": "error", "data": {"message": str(self), "code": self.code}}


def _code_of(error: ProtocolError) -> str:
    """OpenEnv's code for one of ours: what the client sent was wrong, or what the environment did."""
    if isinstance(error, CapacityError):
        return "CAPACITY_REACHED"
    if isinstance(error, BadRequestError | InvalidActionError):
        return "VALIDATION_ERROR"
    return "EXECUTION_ERROR"


def mcp_tools(description: dict[str, Any]) -> list[dict[str, Any]]:
    """The environment's tools as MCP Tool objects."""
    return [{"name": tool["name"], "description": tool.get("description", ""),
             "inputSchema": tool.get("parameters") or {"type": "object", "properties": {}}}
            for tool in description.get("tools") or ()]


def action_of(data: Any) -> Any:
    """Our action for OpenEnv step data: a tool call, text, or the object as it is."""
    if not isinstance(data, dict):
        raise OpenEnvError("VALIDATION_ERROR", "step 'data' must be an object: the action")
    data = {key: value for key, value in data.items() if key != "metadata"}
    if data.get("type") == "call_tool":
        if not isinstance(data.get("tool_name"), str):
            raise OpenEnvError("VALIDATION_ERROR", "a call_tool action needs 'tool_name' (a string)")
        arguments = data.get("arguments", {})
        if not isinstance(arguments, dict):
            raise OpenEnvError("VALIDATION_ERROR", "a call_tool action's 'arguments' must be an object")
        return {"name": data["tool_name"], "arguments": arguments}
    for key in ("message", "text"):
        if set(data) == {key} and isinstance(data[key], str):
            return data[key]
    return data


class OpenEnvSocket(Owner):
    """One OpenEnv socket: at most one session, and the episode id its last reset named."""

    __slots__ = ("last_used", "session_id")

    def __init__(self, now: float = 0.0) -> None:
        super().__init__()
        self.session_id: str | None = None
        self.last_used = now  # POST /mcp sessions: forgotten after the idle timeout


class OpenEnvFrontEnd:
    def __init__(self, core: SessionCore, token: str | None = None) -> None:
        self.core = core
        self.token = token
        self.tools = mcp_tools(core.description)
        self.http_sessions: dict[str, OpenEnvSocket] = {}  # POST /mcp sessions, by the id openenv/session/create gave
        self._types: dict[str, Callable[[OpenEnvSocket, dict], Any]] = {
            "reset": self._reset, "step": self._step, "state": self._state, "mcp": self._mcp}

    def expire_idle(self, now: float) -> int:
        """Forget the POST /mcp sessions unused for longer than the idle timeout (their clients went away)."""
        idle = [key for key, owner in self.http_sessions.items()
                if now - owner.last_used > self.core.limits.idle_timeout]
        for key in idle:
            self.core.drop(self.http_sessions.pop(key))
        return len(idle)

    def shutdown(self) -> None:
        for owner in self.http_sessions.values():
            self.core.drop(owner)
        self.http_sessions.clear()

    # -- OpenEnv's GET routes ----------------------------------------------------------------------------

    def health(self) -> dict:
        return {"status": "healthy"}

    def metadata(self) -> dict:
        """OpenEnv's EnvironmentMetadata."""
        description = self.core.description
        return {"name": description.get("name", ""), "description": description.get("description", ""),
                "readme_content": None, "version": None, "author": None, "documentation_url": None}

    def schema(self) -> dict:
        """JSON schemas of the actions, observations and state this front end takes and gives."""
        tool_call = {"type": "object", "required": ["type", "tool_name"], "properties": {
            "type": {"const": "call_tool"}, "tool_name": {"enum": [t["name"] for t in self.tools]},
            "arguments": {"type": "object"}}}
        text = {"type": "object", "required": ["message"], "properties": {"message": {"type": "string"}}}
        listing = {"type": "object", "required": ["type"], "properties": {"type": {"const": "list_tools"}}}
        # an env without tools that declares its action's schema (an OpenEnv env's Action model) shows that one
        action = {"oneOf": [tool_call, listing, text]} if self.tools else (
            self.core.description.get("action_schema") or {"oneOf": [text, {"type": "object"}]})
        observation = {"type": "object", "properties": {
            "text": {"type": "string"}, "info": {"type": "object"}, "terminated": {"type": "boolean"},
            "truncated": {"type": "boolean"}, "metadata": {"type": "object"}}}
        state = {"type": "object", "properties": {
            "episode_id": {"type": ["string", "null"]}, "step_count": {"type": "integer", "minimum": 0},
            "running": {"type": "boolean"}, "max_steps": {"type": ["integer", "null"]}}}
        return {"action": action, "observation": observation, "state": state}

    async def serve(self, connection: ServerConnection, watch: FrameWatch) -> None:
        """The life of one socket: its requests in turn, then its session ends with it. A socket opened on
        `/ws?session_id=ID` works on the POST /mcp session ID instead, which outlives it."""
        attach = parse_qs(urlsplit(connection.request.path).query).get("session_id") if connection.request else None
        owner = self.http_sessions.get(attach[0]) if attach else OpenEnvSocket()
        if owner is None:
            await self._send(connection, OpenEnvError("SESSION_ERROR", (
                f"no session {attach[0]!r}: create one with POST /mcp openenv/session/create")).frame())
            await connection.close(1000)
            return
        if not attach and self.core.counter.total() >= self.core.limits.max_sessions:
            await self._send(connection, OpenEnvError("CAPACITY_REACHED", (
                f"Server at capacity: {self.core.counter.total()}/{self.core.limits.max_sessions} sessions active. "
                "Cannot accept new connections.")).frame())
            await connection.close(1000)
            return
        try:
            async for raw in connection:
                watch.frames += 1
                owner.last_used = self.core.loop.time()
                message = self._message(raw)
                if isinstance(message, OpenEnvError):
                    await self._send(connection, message.frame())
                    continue
                if message["type"] == "close":
                    break
                try:
                    answer = await self._types[message["type"]](owner, message)
                except OpenEnvError as exc:
                    answer = exc.frame()
                except ProtocolError as exc:
                    answer = OpenEnvError(_code_of(exc), str(exc)).frame()
                await self._send(connection, answer, owner)
        except ConnectionClosed:
            pass
        finally:
            if not attach:
                self.core.drop(owner)
        await connection.close(1000)

    async def _send(self, connection: ServerConnection, frame: dict, owner: OpenEnvSocket | None = None) -> None:
        try:
            text = orjson.dumps(frame, option=orjson.OPT_SERIALIZE_NUMPY)
        except TypeError as exc:  # the environment returned what JSON cannot carry: its session ends
            error = self.core.end_unsendable(owner or OpenEnvSocket(), owner and owner.session_id, str(exc))
            text = orjson.dumps(OpenEnvError("EXECUTION_ERROR", str(error)).frame())
        await connection.send(text.decode())

    def _message(self, raw: str | bytes) -> dict | OpenEnvError:
        try:
            message = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            return OpenEnvError("INVALID_JSON", f"Invalid JSON: {exc}")
        if not isinstance(message, dict) or not isinstance(message.get("type"), str):
            return OpenEnvError("VALIDATION_ERROR", "Invalid message: an object with a string 'type' is expected")
        if message["type"] not in self._types and message["type"] != "close":
            return OpenEnvError("UNKNOWN_TYPE", f"Unknown message type: {message['type']}")
        return message

    # -- the session core, one request at a time -------------------------------------------------------

    async def _reset(self, owner: OpenEnvSocket, message: dict) -> dict:
        data = message.get("data") or {}
        if not isinstance(data, dict):
            raise OpenEnvError("VALIDATION_ERROR", "reset 'data' must be an object")
        seed = data.get("seed")
        if seed is not None and (type(seed) is not int or seed < 0):
            raise OpenEnvError("VALIDATION_ERROR", "seed must be a non-negative integer")
        options = {key: value for key, value in data.items() if key not in RESET_KEYS} or None
        outcome: asyncio.Future = asyncio.get_running_loop().create_future()
        self.core.reset(owner, owner.session_id, seed, options, lambda sid, result: outcome.set_result((sid, result)))
        session_id, result = await outcome
        if isinstance(result, ProtocolError):
            if owner.session_id is not None and owner.session_id not in owner.sessions:
                owner.session_id = None  # the reset ended the session: the next one starts a new one
            raise result
        owner.session_id = session_id
        return _observation(result.obs, result.info, None, False, False)

    async def _step(self, owner: OpenEnvSocket, message: dict) -> dict:
        if "data" not in message:
            raise OpenEnvError("VALIDATION_ERROR", "step needs 'data': the action")
        if isinstance(message["data"], dict) and message["data"].get("type") == "list_tools":
            return {"type": "observation", "data": {"observation": {"tools": self.tools, "metadata": {}},
                                                    "reward": None, "done": False}}
        result = await self._stepped(owner, action_of(message["data"]))
        return _observation(result.obs, result.info, result.reward, result.terminated, result.truncated)

    async def _stepped(self, owner: OpenEnvSocket, action: Any) -> Any:
        if owner.session_id is None:
            raise NoEpisodeError("step before reset: send a reset first")
        outcome: asyncio.Future = asyncio.get_running_loop().create_future()
        try:
            self.core.step(owner, owner.session_id, action, outcome.set_result)
        except UnknownSessionError:
            owner.session_id = None
            raise
        result = await outcome
        if isinstance(result, ProtocolError):
            if owner.session_id not in owner.sessions:
                owner.session_id = None  # the environment failed or timed out: its session ended
            raise result
        return result

    async def _state(self, owner: OpenEnvSocket, message: dict) -> dict:
        """OpenEnv's State: episode_id and step_count, and the environment's extras next to them."""
        state: dict[str, Any] = {"episode_id": None, "step_count": 0}
        if owner.session_id is not None and owner.session_id in owner.sessions:
            ours = self.core.state(owner, owner.session_id)
            state = ours.get("extras", {}) | {"episode_id": ours["episode_id"], "step_count": ours["steps"],
                                              "running": ours["running"], "max_steps": ours["max_steps"]}
        return {"type": "state", "data": state}

    # -- POST /mcp: JSON-RPC over HTTP, with OpenEnv's session extensions ---------------------------------

    async def post_mcp(self, request: Any, headers: list[tuple[str, str]]) -> tuple[int, Any]:
        """One JSON-RPC request: MCP's initialize, tools/list and tools/call, and OpenEnv's
        openenv/session/create and openenv/session/close (a session's calls name it in params.session_id)."""
        if self.token is not None:
            refusal = authorization_refusal([v for k, v in headers if k == "authorization"], self.token)
            if refusal is not None:
                return HTTPStatus.UNAUTHORIZED, {"error": UnauthorizedError(refusal).to_wire()}
        if isinstance(request, NotJson):
            return HTTPStatus.OK, {"jsonrpc": "2.0", "id": None, "error": {
                "code": JSONRPC_PARSE_ERROR, "message": f"Parse error: {request.reason}", "data": None}}
        if not isinstance(request, dict):
            return HTTPStatus.OK, {"jsonrpc": "2.0", "id": None, "error": {
                "code": JSONRPC_INVALID_REQUEST, "message": "Invalid Request: send one JSON-RPC 2.0 object",
                "data": None}}
        if "id" not in request:  # a notification (notifications/initialized): nothing to answer
            return HTTPStatus.ACCEPTED, None
        method, params, rid = request.get("method"), request.get("params") or {}, request.get("id")
        if method == "initialize":
            version = params.get("protocolVersion") if isinstance(params, dict) else None
            return HTTPStatus.OK, {"jsonrpc": "2.0", "id": rid, "result": {
                "protocolVersion": version or MCP_PROTOCOL_VERSION, "capabilities": {"tools": {"listChanged": False}},
                "serverInfo": {"name": self.core.description.get("name", ""), "version": "openenv-gym"}}}
        if method == "openenv/session/create":
            if len(self.http_sessions) >= self.core.limits.max_sessions:
                return HTTPStatus.OK, {"jsonrpc": "2.0", "id": rid, "error": {
                    "code": JSONRPC_SERVER_ERROR, "message": "Server at capacity", "data": None}}
            session_id = secrets.token_urlsafe(16)
            self.http_sessions[session_id] = OpenEnvSocket(self.core.loop.time())
            return HTTPStatus.OK, {"jsonrpc": "2.0", "id": rid, "result": {"session_id": session_id}}
        session_id = params.get("session_id") if isinstance(params, dict) else None
        owner = self.http_sessions.get(session_id) if isinstance(session_id, str) else None
        if method == "openenv/session/close":
            if owner is not None:
                self.core.drop(self.http_sessions.pop(session_id))
            return HTTPStatus.OK, {"jsonrpc": "2.0", "id": rid, "result": {"closed": owner is not None}}
        if owner is not None:
            owner.last_used = self.core.loop.time()
        if session_id is not None and owner is None:
            return HTTPStatus.OK, {"jsonrpc": "2.0", "id": rid, "error": {
                "code": JSONRPC_INVALID_PARAMS, "message": f"no session {session_id!r}: create one with "
                                                           "openenv/session/create", "data": None}}
        if owner is not None or method != "tools/call":
            return HTTPStatus.OK, await self.jsonrpc(owner or OpenEnvSocket(), request)
        stateless = OpenEnvSocket()  # a call that names no session: a session of its own, for this call only
        try:
            return HTTPStatus.OK, await self.jsonrpc(stateless, request)
        finally:
            self.core.drop(stateless)

    async def _mcp(self, owner: OpenEnvSocket, message: dict) -> dict:
        return {"type": "mcp", "data": await self.jsonrpc(owner, message.get("data"))}

    async def jsonrpc(self, owner: OpenEnvSocket, request: Any) -> dict:
        """A JSON-RPC answer to MCP's tools/list or tools/call, played on the owner's session."""
        rid = request.get("id") if isinstance(request, dict) else None

        def error(code: int, text: str) -> dict:
            return {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": text, "data": None}}

        if not isinstance(request, dict) or not isinstance(request.get("method"), str):
            return error(JSONRPC_INVALID_REQUEST, "Invalid Request: a JSON-RPC 2.0 object with a 'method' is expected")
        params = request.get("params") or {}
        if request["method"] == "tools/list":
            return {"jsonrpc": "2.0", "id": rid, "result": {"tools": self.tools}}
        if request["method"] != "tools/call":
            return error(JSONRPC_METHOD_NOT_FOUND, f"Method not found: {request['method']}")
        if not isinstance(params, dict) or not isinstance(params.get("name"), str):
            return error(JSONRPC_INVALID_PARAMS, "tools/call needs params {'name': <tool>, 'arguments': {...}}")
        try:
            if owner.session_id is None:  # a session made for tools only: its episode starts at the first call
                await self._reset(owner, {"data": {}})
            result = await self._stepped(owner, {"name": params["name"], "arguments": params.get("arguments") or {}})
        except ProtocolError as exc:
            return error(JSONRPC_INTERNAL, str(exc))
        failed = "error" in result.info
        return {"jsonrpc": "2.0", "id": rid, "result": {
            "content": [{"type": "text", "text": result.obs}], "isError": failed, "data": result.obs,
            "structuredContent": {"reward": result.reward, "terminated": result.terminated,
                                  "truncated": result.truncated, "info": result.info}}}


def _observation(text: str, info: dict, reward: float | None, terminated: bool, truncated: bool) -> dict:
    return {"type": "observation", "data": {
        "observation": {"text": text, "info": info, "terminated": terminated, "truncated": truncated,
                        "metadata": {}},
        "reward": reward, "done": terminated or truncated}}

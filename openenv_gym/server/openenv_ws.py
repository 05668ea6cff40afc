"""OpenEnv's `/ws` protocol (openenv 0.10.0), a second front end over the session core: OpenEnv's own clients
(`GenericEnvClient`, `MCPToolClient`, ...) play any environment this server serves. The message shapes are
protocol/openenv.py's (and openenv_payloads.py's, mcp.py's): this module only turns them into calls of the core.

One socket is one session, as in OpenEnv, but a socket is a coroutine here, not a thread: a worker holds
thousands of them. Each socket carries one request and one answer at a time (OpenEnv's messages carry no id).

An action is a tool call as OpenEnv's MCP actions write it (`{"type": "call_tool", "tool_name", "arguments"}`;
`{"type": "list_tools"}` lists the tools without stepping), text (`{"message": "..."}` or `{"text": "..."}`),
or any other object, given to the environment as it is; an OpenEnv environment gets the object as OpenEnv's
server gives it. On this front end OpenEnv's rules hold, not the native protocol's:
- an action the environment's Action model refuses is a VALIDATION_ERROR (not an invalid-action observation),
  and not a step;
- an environment that raises answers EXECUTION_ERROR, and the session and its episode go on;
- an OpenEnv environment's observations, state and /schema are its own models'.
Errors are OpenEnv's (INVALID_JSON, UNKNOWN_TYPE, VALIDATION_ERROR, EXECUTION_ERROR, CAPACITY_REACHED); the
socket and its session go on after each.
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
    ErrorCode,
    InvalidActionError,
    NoEpisodeError,
    ProtocolError,
    UnauthorizedError,
    UnknownSessionError,
)
from openenv_gym.protocol import mcp
from openenv_gym.protocol import openenv as wire
from openenv_gym.protocol.openenv_payloads import metadata_of, payload_of, schema_of, state_of
from openenv_gym.server.core import SessionCore
from openenv_gym.server.frames import FrameWatch
from openenv_gym.server.http import authorization_refusal
from openenv_gym.server.http_post import NotJson
from openenv_gym.server.sessions import Owner

OPENENV_PATH = "/ws"


class OpenEnvSocket(Owner):
    """One OpenEnv socket: at most one session, and the episode id its last reset named."""

    __slots__ = ("last_used", "session_id")
    failures_end_sessions = False  # OpenEnv keeps the environment, and its episode, after it raised

    def __init__(self, now: float = 0.0) -> None:
        super().__init__()
        self.session_id: str | None = None
        self.last_used = now  # POST /mcp sessions: forgotten after the idle timeout


class OpenEnvFrontEnd:
    def __init__(self, core: SessionCore, token: str | None = None) -> None:
        self.core = core
        self.token = token
        self.tools = [mcp.mcp_tool(tool) for tool in core.description.get("tools") or ()]
        self.openenv_env = core.description.get("source") == "openenv"  # its own payloads, state and schemas
        self.http_sessions: dict[str, OpenEnvSocket] = {}  # POST /mcp sessions, by the id openenv/session/create gave
        self._types: dict[str, Callable[[OpenEnvSocket, dict], Any]] = {
            wire.RESET: self._reset, wire.STEP: self._step, wire.STATE: self._state, wire.MCP: self._mcp}

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
        return metadata_of(self.core.description)

    def schema(self) -> dict:
        """JSON schemas of the actions, observations and state this front end takes and gives."""
        return schema_of(self.core.description, self.tools)

    async def serve(self, connection: ServerConnection, watch: FrameWatch) -> None:
        """The life of one socket: its requests in turn, then its session ends with it. A socket opened on
        `/ws?session_id=ID` works on the POST /mcp session ID instead, which outlives it."""
        attach = parse_qs(urlsplit(connection.request.path).query).get("session_id") if connection.request else None
        owner = self.http_sessions.get(attach[0]) if attach else OpenEnvSocket()
        if owner is None:
            await self._send(connection, wire.error_frame(wire.SESSION_ERROR, (
                f"no session {attach[0]!r}: create one with POST /mcp openenv/session/create")))
            await connection.close(1000)
            return
        if not attach and self.core.counter.total() >= self.core.limits.max_sessions:
            self.core.metrics.error(ErrorCode.CAPACITY)
            await self._send(connection, wire.error_frame(wire.CAPACITY_REACHED, (
                f"Server at capacity: {self.core.counter.total()}/{self.core.limits.max_sessions} sessions active. "
                "Cannot accept new connections.")))
            await connection.close(1000)
            return
        try:
            async for raw in connection:
                watch.frames += 1
                owner.last_used = self.core.loop.time()
                try:
                    message = wire.read_message(raw)
                    if message["type"] == wire.CLOSE:
                        break
                    answer = await self._types[message["type"]](owner, message)
                except wire.WireError as exc:
                    self.core.metrics.error(ErrorCode.BAD_REQUEST)
                    answer = exc.frame()
                except ProtocolError as exc:
                    self.core.metrics.error(exc.code)
                    answer = wire.error_frame(wire.code_of(exc), str(exc))
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
            self.core.metrics.error(error.code)
            text = orjson.dumps(wire.error_frame(wire.EXECUTION_ERROR, str(error)))
        await connection.send(text.decode())

    # -- the session core, one request at a time -------------------------------------------------------

    async def _reset(self, owner: OpenEnvSocket, message: dict) -> dict:
        seed, options = wire.reset_arguments(message)
        outcome: asyncio.Future = asyncio.get_running_loop().create_future()
        self.core.reset(owner, owner.session_id, seed, options, lambda sid, result: outcome.set_result((sid, result)))
        session_id, result = await outcome
        if isinstance(result, ProtocolError):
            if owner.session_id is not None and owner.session_id not in owner.sessions:
                owner.session_id = None  # the reset ended the session: the next one starts a new one
            raise result
        owner.session_id = session_id
        return wire.observation_frame(payload_of(result, self.openenv_env))

    async def _step(self, owner: OpenEnvSocket, message: dict) -> dict:
        data = wire.step_data(message)
        if wire.is_list_tools(data):
            return wire.observation_frame({"observation": {"tools": self.tools, "metadata": {}}, "reward": None,
                                           "done": False})
        # an OpenEnv environment takes OpenEnv's action as it is; ours, the action it makes
        result = await self._stepped(owner, data if self.openenv_env else wire.action_of(data))
        return wire.observation_frame(payload_of(result, self.openenv_env))

    async def _stepped(self, owner: OpenEnvSocket, action: Any) -> Any:
        if owner.session_id is None:
            raise NoEpisodeError("step before reset: send a reset first")
        refusal = self.core.refusal(owner, owner.session_id, action)
        if refusal is not None:  # refused before the environment sees it, as OpenEnv's server does
            raise InvalidActionError(refusal)
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
        state: dict[str, Any] = {}
        if owner.session_id is not None and owner.session_id in owner.sessions:
            state = self.core.state(owner, owner.session_id)
        return wire.state_frame(state_of(state, self.openenv_env))

    # -- POST /mcp: JSON-RPC over HTTP, with OpenEnv's session extensions ---------------------------------

    async def post_mcp(self, request: Any, headers: list[tuple[str, str]]) -> tuple[int, Any]:
        """One JSON-RPC request: MCP's initialize, tools/list and tools/call, and OpenEnv's
        openenv/session/create and openenv/session/close (a session's calls name it in params.session_id)."""
        if self.token is not None:
            refusal = authorization_refusal([v for k, v in headers if k == "authorization"], self.token)
            if refusal is not None:
                return HTTPStatus.UNAUTHORIZED, {"error": UnauthorizedError(refusal).to_wire()}
        if isinstance(request, NotJson):
            return HTTPStatus.OK, mcp.error(None, mcp.PARSE_ERROR, f"Parse error: {request.reason}")
        if not isinstance(request, dict):
            return HTTPStatus.OK, mcp.error(None, mcp.INVALID_REQUEST, "Invalid Request: send one JSON-RPC 2.0 object")
        if "id" not in request:  # a notification (notifications/initialized): nothing to answer
            return HTTPStatus.ACCEPTED, None
        try:
            return HTTPStatus.OK, await self._post_mcp(request)
        except mcp.JsonRpcError as exc:
            return HTTPStatus.OK, mcp.error(request.get("id"), exc.code, str(exc))

    async def _post_mcp(self, request: dict) -> dict:
        rid, method, params = mcp.method_of(request)
        if method == mcp.INITIALIZE:
            return mcp.initialized(rid, params.get("protocolVersion"), self.core.description.get("name", ""))
        if method == mcp.SESSION_CREATE:
            if len(self.http_sessions) >= self.core.limits.max_sessions:
                raise mcp.JsonRpcError(mcp.SERVER_ERROR, "Server at capacity")
            session_id = secrets.token_urlsafe(16)
            self.http_sessions[session_id] = OpenEnvSocket(self.core.loop.time())
            return mcp.session_created(rid, session_id)
        session_id = mcp.session_of(params)
        owner = self.http_sessions.get(session_id) if isinstance(session_id, str) else None
        if method == mcp.SESSION_CLOSE:
            if owner is not None:
                self.core.drop(self.http_sessions.pop(session_id))
            return mcp.session_closed(rid, owner is not None)
        if session_id is not None and owner is None:
            raise mcp.JsonRpcError(mcp.INVALID_PARAMS, f"no session {session_id!r}: create one with "
                                                       "openenv/session/create")
        if owner is not None:
            owner.last_used = self.core.loop.time()
            return await self.jsonrpc(owner, request)
        stateless = OpenEnvSocket()  # a call that names no session: a session of its own, for this call only
        try:
            return await self.jsonrpc(stateless, request)
        finally:
            self.core.drop(stateless)

    async def _mcp(self, owner: OpenEnvSocket, message: dict) -> dict:
        return wire.mcp_frame(await self.jsonrpc(owner, message.get("data")))

    async def jsonrpc(self, owner: OpenEnvSocket, request: Any) -> dict:
        """A JSON-RPC answer to MCP's tools/list or tools/call, played on the owner's session."""
        rid = request.get("id") if isinstance(request, dict) else None
        try:
            rid, method, params = mcp.method_of(request)
            if method == mcp.TOOLS_LIST:
                return mcp.tools_listed(rid, self.tools)
            if method != mcp.TOOLS_CALL:
                raise mcp.JsonRpcError(mcp.METHOD_NOT_FOUND, f"Method not found: {method}")
            call = mcp.tool_call_of(params)
        except mcp.JsonRpcError as exc:
            return mcp.error(rid, exc.code, str(exc))
        try:
            if owner.session_id is None:  # a session made for tools only: its episode starts at the first call
                await self._reset(owner, {"data": {}})
            result = await self._stepped(owner, call)
        except ProtocolError as exc:
            return mcp.error(rid, mcp.INTERNAL_ERROR, str(exc))
        return mcp.tool_called(rid, result)

"""The OpenEnv transport: any running OpenEnv server (openenv 0.10.0's `/ws`), local, in a container or a Space.

    env = gym.make("openenv/remote", base_url="http://127.0.0.1:8000")   # probes; an OpenEnv server lands here
    envs = gym.make_vec("openenv/remote", num_envs=64, base_url="http://127.0.0.1:8000")

OpenEnv's WebSocket carries one session and one request at a time with no request id, so each session is a
socket of its own, opened at its first reset. `open` reads `/schema` and `/metadata`: an environment whose
action is MCP's CallToolAction takes tool calls (listed once with a `list_tools` step); any other takes an
object of its Action model, checked against the schema before it is sent, or text when the model has one
text field. The episode rules are applied here, as OpenEnv keeps none of ours: the step limit (reset option
max_steps), no auto-reset, and `done` as terminated. A server that gives no answer within the request timeout
loses the socket (its session), as OpenEnv's own client does: a late answer would be read as the next one's.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import orjson
from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake

from openenv_gym.client.native.handshake import websocket_url
from openenv_gym.client.transport import DEFAULT_REQUEST_TIMEOUT, StepTuple, Transport, TransportSession
from openenv_gym.episode.results import Action, invalid_action
from openenv_gym.episode.state import Episode, episode_id_of, step_limit
from openenv_gym.errors import (
    CapacityError,
    ConnectionLostError,
    EnvError,
    OpenEnvGymError,
    RequestTimeoutError,
    ServerUnreachableError,
)
from openenv_gym.protocol.openenv import (
    close_message,
    frame_data,
    list_tools_message,
    reset_message,
    state_message,
    step_message,
)
from openenv_gym.protocol.openenv_payloads import (
    is_tool_schema,
    reset_from_payload,
    state_extras,
    step_from_payload,
    text_field,
    wire_action,
)
from openenv_gym.protocol.tool_specs import as_tool

MAX_MESSAGE_BYTES = 100 * 2**20  # what OpenEnv's client accepts by default
RESERVED_OPTIONS = ("max_steps",)  # reset options of ours that OpenEnv's reset does not get


def http_url(url: str) -> str:
    url = url.rstrip("/")
    for ws, http in (("ws://", "http://"), ("wss://", "https://")):
        if url.startswith(ws):
            return http + url.removeprefix(ws)
    return url


async def answers_health(url: str, timeout: float, ended: Callable[[], Awaitable[bool]] | None = None) -> bool:
    """Whether the OpenEnv server at `url` answers GET /health within `timeout` seconds (tried every 50 ms to
    200 ms), before `ended()` says it will not (its process exited)."""
    deadline, pause = time.monotonic() + timeout, 0.05
    async with httpx.AsyncClient(timeout=5.0) as http:
        while time.monotonic() < deadline and not (ended is not None and await ended()):
            with contextlib.suppress(httpx.HTTPError):
                if (await http.get(f"{http_url(url)}/health")).status_code == 200:
                    return True
            await asyncio.sleep(pause)
            pause = min(pause * 2, 0.2)
    return False


class OpenEnvTransport(Transport):
    """One OpenEnv server: its environment, one socket per session."""

    def __init__(self, url: str, *, env: str | None = None, token: str | None = None,
                 request_timeout: float | None = DEFAULT_REQUEST_TIMEOUT, open_timeout: float = 10.0,
                 connections_per_worker: int | None = None, env_args: dict[str, Any] | None = None,
                 max_steps: int | None = None) -> None:
        """env: not needed (an OpenEnv server serves one environment). token: sent as a bearer token (a private
        Space). connections_per_worker is not used: every session has its own socket."""
        if env_args:
            raise ValueError("an OpenEnv server is started with its environment's arguments; env_args cannot be "
                             "given by the client")
        self.url = http_url(url)
        self.ws_url = websocket_url(self.url) + "/ws"
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.request_timeout = request_timeout
        self.open_timeout = open_timeout
        self.max_steps = max_steps
        self.description: dict[str, Any] = {}
        self.tools: list[dict] | None = None  # None: the environment takes action objects, not tool calls
        self.text_to: str | None = None
        self.validator: Draft202012Validator | None = None
        self.sessions_open: set[OpenEnvSession] = set()
        self._closed = False

    async def open(self) -> OpenEnvTransport:
        async with httpx.AsyncClient(base_url=self.url, headers=self.headers, timeout=self.open_timeout) as http:
            try:
                schema = (await http.get("/schema")).raise_for_status().json()
                metadata = (await http.get("/metadata")).raise_for_status().json()
            except httpx.HTTPError as exc:
                said = str(exc) or type(exc).__name__  # (a timeout says nothing but its kind)
                raise ServerUnreachableError(f"cannot read /schema and /metadata of the OpenEnv server at {self.url}: "
                                             f"{said}") from None
        action_schema = schema.get("action") or {}
        if is_tool_schema(action_schema):
            self.tools = await self._list_tools()
        else:
            self.text_to = text_field(action_schema)
            self.validator = Draft202012Validator(action_schema)
        self.description = {
            "name": metadata.get("name") or "openenv", "description": metadata.get("description") or "",
            "action": "tools" if self.tools is not None else "text", "tools": self.tools or [],
            "max_steps": self.max_steps, "source": "openenv-ws", "action_schema": action_schema}
        return self

    async def _list_tools(self) -> list[dict]:
        """The tools, from a `list_tools` step on a socket of its own (OpenEnv answers it without a reset)."""
        socket = OpenEnvSession(self)
        try:
            listed = await socket.ask(list_tools_message())
        finally:
            await socket.close()
        return [as_tool(t) for t in (listed.get("observation") or {}).get("tools") or ()]

    async def connect(self) -> ClientConnection:
        try:
            return await connect(self.ws_url, additional_headers=self.headers, open_timeout=self.open_timeout,
                                 max_size=MAX_MESSAGE_BYTES, proxy=None)
        except (OSError, TimeoutError, InvalidHandshake) as exc:
            raise ServerUnreachableError(f"cannot open a WebSocket to the OpenEnv server at {self.ws_url}: "
                                         f"{exc}") from None

    def check(self, action: Any) -> dict[str, Any] | str:
        """The OpenEnv action of one of ours, or why it makes none (checked against the action schema)."""
        wire = wire_action(action, self.tools, self.text_to)
        if isinstance(wire, dict) and self.validator is not None:
            error = best_match(self.validator.iter_errors(wire))
            if error is not None:
                where = "/".join(map(str, error.absolute_path)) or "the action"
                return f"{where}: {error.message} (the server's action schema is in info['action_schema'])"
        return wire

    @property
    def closed(self) -> bool:
        return self._closed

    def session(self) -> OpenEnvSession:
        return OpenEnvSession(self)

    async def close(self) -> None:
        self._closed = True
        await asyncio.gather(*(s.close() for s in list(self.sessions_open)), return_exceptions=True)

    async def splits(self) -> list[dict[str, Any]]:
        return []  # OpenEnv's task routes are per environment and optional; tasks are picked by reset options

    async def tasks(self, split: str | None = None, start: int | None = None,
                    stop: int | None = None) -> list[dict[str, Any]]:
        raise OpenEnvGymError("an OpenEnv server's tasks are not listed through openenv_gym; pick one with the "
                              "reset options the environment takes (split=..., index=..., say)")


class OpenEnvSession(TransportSession):
    """One OpenEnv session: its own socket, opened at the first reset, one request at a time."""

    def __init__(self, transport: OpenEnvTransport) -> None:
        self.transport = transport
        self.id: str | None = None  # local: OpenEnv names no session on /ws
        self.ws: ClientConnection | None = None
        self.episode = Episode()
        self.lock = asyncio.Lock()

    async def ask(self, message: dict) -> dict:
        """Send one message and return the `data` of its answer; an error answer raises its typed error."""
        async with self.lock:
            if self.ws is None:
                self.ws = await self.transport.connect()
                self.transport.sessions_open.add(self)
            ws = self.ws
            try:
                await ws.send(orjson.dumps(message).decode())
                async with asyncio.timeout(self.transport.request_timeout):
                    answer = orjson.loads(await ws.recv())
                if not isinstance(answer, dict):
                    raise orjson.JSONDecodeError("not a JSON object", "", 0)
            except TimeoutError:
                await self._drop()
                raise RequestTimeoutError(
                    f"no answer from {self.transport.ws_url} within {self.transport.request_timeout:g} s; its "
                    "session is dropped (a late answer would be taken for the next one's); raise request_timeout "
                    "if the environment is slow") from None
            except ConnectionClosed as exc:
                await self._drop()
                raise ConnectionLostError(f"the OpenEnv server closed the session's socket ({exc}); reset to "
                                          "start a new one") from None
            except orjson.JSONDecodeError as exc:  # nothing after an unreadable answer can be trusted
                await self._drop()
                raise EnvError(f"the OpenEnv server at {self.transport.ws_url} sent an answer that is not a JSON "
                               f"object ({exc}); its session is dropped") from None
        try:
            return frame_data(answer)
        except CapacityError:
            await self._drop()  # the server closes the socket after this frame
            raise
        except EnvError:
            self.episode.live = False  # the environment raised: our rule ends the episode (OpenEnv's keeps it)
            raise

    async def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[str, dict]:
        options = dict(options or {})
        limit = step_limit(options, self.transport.max_steps)
        episode_id = episode_id_of(options)
        data = {k: v for k, v in options.items() if k not in RESERVED_OPTIONS} | {"episode_id": episode_id}
        result = reset_from_payload(await self.ask(reset_message(seed, data)))
        self.id = self.id or str(uuid.uuid4())
        self.episode.begin(limit, episode_id)
        return result.obs, result.info

    async def step(self, action: Action) -> StepTuple:
        self.episode.require_running("the session on the OpenEnv server")
        wire = self.transport.check(action)
        result = invalid_action(wire) if isinstance(wire, str) else step_from_payload(
            await self.ask(step_message(wire)))
        truncated = self.episode.count(result.terminated, result.truncated)
        return result.obs, result.reward, result.terminated, truncated, result.info

    async def state(self) -> dict[str, Any]:
        if self.ws is None or self.episode.episode_id is None:
            return Episode().state(None)
        theirs = await self.ask(state_message())
        extras = state_extras(theirs)
        state = self.episode.state(self.id) | {"episode_id": theirs.get("episode_id", self.episode.episode_id)}
        return state | ({"extras": extras} if extras else {})

    async def _drop(self) -> None:
        ws, self.ws = self.ws, None
        self.id = None
        self.episode.live = False
        self.transport.sessions_open.discard(self)
        if ws is not None:
            await ws.close()

    async def close(self) -> None:
        """Close the socket; OpenEnv's server ends the session with it. Idempotent."""
        if self.ws is not None:
            with contextlib.suppress(ConnectionClosed):
                await self.ws.send(orjson.dumps(close_message()).decode())
        await self._drop()

"""The ORS transport: an existing ORS HTTP+SSE server (such as openreward's `Server`), driven with httpx.

    env = gym.make("openenv/ors", base_url="http://127.0.0.1:8080", env="counter")

reset: /create_session (an SSE or a JSON answer), /create with split+index (so this side never holds the
task spec) or a task_spec, then /{env}/prompt (503 "starting" is retried).
step:  /{env}/call, its SSE answer joined from chunks; an `error` event (the tool raised) ends the session.
An ORS server keeps no episode rules of ours, so this side applies them (episode/, protocol/ors.py): the step
limit, no auto-reset, tool calls found in text, the terminal tool. A ping keeps the session alive while the
episode is open; close deletes it. Secrets go in X-Secrets.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from typing import Any

import httpx
import orjson
from httpx_sse import EventSource

from openenv_gym.client.transport import DEFAULT_REQUEST_TIMEOUT, StepTuple, Transport, TransportSession
from openenv_gym.episode.options import check_options
from openenv_gym.episode.results import Action, invalid_action
from openenv_gym.episode.state import Episode, episode_id_of, step_limit
from openenv_gym.episode.tasks import TASK_SPEC, choose_task, reveals_hidden, splits_with_counts
from openenv_gym.errors import BadRequestError, EnvError, ServerUnreachableError
from openenv_gym.protocol.ors import (
    DEFAULT_MAX_STEPS,
    RESET_OPTIONS,
    ToolListing,
    render_blocks,
    secrets_header,
    secrets_of,
    split_entry,
    step_from_tool_result,
)

PING_INTERVAL = 10.0
KNOWN_OPTIONS = frozenset(RESET_OPTIONS)
STARTING_RETRIES = 300  # 503 "starting" answers ridden out (with their Retry-After) before giving up


class KeepAlive:
    """Pings every open ORS session of this process from one daemon thread.

    A thread, not a task: a sync RemoteEnv runs its event loop only during calls, and the gaps between
    calls (while a model generates) are exactly when the server's 900 s idle reaper would strike.
    """

    def __init__(self) -> None:
        self.sessions: dict[str, str] = {}  # sid -> base_url
        self.sent = 0
        self.failed = 0
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def register(self, base_url: str, sid: str) -> None:
        with self._lock:
            self.sessions[sid] = base_url
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="ors-keepalive", daemon=True)
                self._thread.start()

    def unregister(self, sid: str) -> None:
        with self._lock:
            self.sessions.pop(sid, None)

    def _run(self) -> None:
        with httpx.Client(timeout=10) as http:
            while True:
                time.sleep(PING_INTERVAL)
                with self._lock:
                    open_sessions = list(self.sessions.items())
                for sid, base_url in open_sessions:
                    try:
                        http.post(f"{base_url}/ping", headers={"X-Session-ID": sid}).raise_for_status()
                        self.sent += 1
                    except httpx.HTTPError:
                        self.failed += 1  # the next call on that session reports what is wrong


keep_alive = KeepAlive()


class OrsTransport(Transport):
    """One ORS server and one of its environments."""

    def __init__(self, url: str, *, env: str | None = None, token: str | None = None,
                 request_timeout: float | None = DEFAULT_REQUEST_TIMEOUT, open_timeout: float = 10.0,
                 connections_per_worker: int | None = None, env_args: dict[str, Any] | None = None,
                 max_steps: int = DEFAULT_MAX_STEPS) -> None:
        """env: the environment's name on the server. connections_per_worker is not used: httpx pools."""
        if env is None:
            raise ValueError('an ORS server needs the environment\'s name: gym.make("openenv/ors", '
                             'base_url="http://host:port", env="<env name>")')
        if token is not None or env_args:
            raise ValueError("ORS servers take no bearer token and no env_args; per-episode secrets go in the reset "
                             "options: reset(options={'secrets': {...}})")
        self.url = url.rstrip("/")
        self.env = env.lower()
        self.max_steps = max_steps
        self.http = httpx.AsyncClient(base_url=self.url, timeout=httpx.Timeout(request_timeout, connect=open_timeout),
                                      limits=httpx.Limits(max_connections=None, max_keepalive_connections=1000))
        self.description: dict[str, Any] = {}
        self.listing = ToolListing([], None)
        self.catalog = _TaskSource(self)  # kept: the names of its tasks are read once

    @classmethod
    def local_url(cls, env: str, workers: int = 1, env_args: dict[str, Any] | None = None,
                  sandbox: bool = True) -> str:
        raise ValueError('gym.make("openenv/ors") drives a running ORS server: pass base_url="http://host:port" '
                         'and env="<env name>"')

    async def request(self, method: str, path: str, sid: str | None = None, **kwargs: Any) -> httpx.Response:
        headers = kwargs.pop("headers", {}) | ({"X-Session-ID": sid} if sid else {})
        for _ in range(STARTING_RETRIES):
            try:
                response = await self.http.request(method, path, headers=headers, **kwargs)
            except httpx.TransportError as exc:
                raise ServerUnreachableError(f"cannot reach the ORS server at {self.url}: {exc}") from None
            if response.status_code == 503 and response.headers.get("X-Backend-State") == "starting":
                await asyncio.sleep(float(response.headers.get("Retry-After", "2")))
                continue
            if response.status_code == 400 or response.status_code == 422:
                raise BadRequestError(f"the ORS server refused {path}: {response.text[:300]}")
            if response.status_code >= 400:
                raise EnvError(f"the ORS server answered {path} with HTTP {response.status_code}: "
                               f"{response.text[:300]}")
            return response
        raise EnvError(f"the ORS server kept answering {path} with 503 starting")

    async def open(self) -> OrsTransport:
        self.listing = ToolListing.from_wire((await self.request("GET", f"/{self.env}/tools")).json())
        self.description = {"name": self.env, "description": f"{self.env} on the ORS server {self.url}",
                            "action": "tools", "tools": self.listing.tools, "max_steps": self.max_steps,
                            "source": "ors-http", "terminal_tool": self.listing.terminal,
                            "reset_options": RESET_OPTIONS}
        return self

    @property
    def closed(self) -> bool:
        return self.http.is_closed

    def session(self) -> OrsSession:
        return OrsSession(self)

    async def close(self) -> None:
        await self.http.aclose()

    # -- catalog ---------------------------------------------------------------------------------

    async def split_entries(self) -> list[dict[str, str]]:
        return [split_entry(s) for s in (await self.request("GET", f"/{self.env}/splits")).json()]

    async def num_tasks(self, split: str) -> int:
        return int((await self.request("POST", f"/{self.env}/num_tasks", json={"split": split})).json()["num_tasks"])

    async def splits(self) -> list[dict[str, Any]]:
        return await splits_with_counts(self.catalog)

    async def tasks(self, split: str | None = None, start: int | None = None,
                    stop: int | None = None) -> list[dict[str, Any]]:
        split = split if split is not None else (await self.split_entries())[0]["name"]
        body = {"split": split, "start": start, "stop": stop}
        return (await self.request("POST", f"/{self.env}/task_range", json=body)).json()["tasks"]

    # -- sessions --------------------------------------------------------------------------------

    async def create_session(self) -> str:
        """A session id from /create_session, answered as SSE (the Python servers) or JSON (the spec)."""
        async with self.http.stream("POST", "/create_session") as response:
            if "text/event-stream" not in response.headers.get("content-type", ""):
                return orjson.loads(await response.aread())["sid"]
            sid = None
            async for event in EventSource(response).aiter_sse():
                if event.event == "task_id":
                    sid = event.data
                elif event.event == "end":
                    with contextlib.suppress(orjson.JSONDecodeError, TypeError, KeyError):
                        sid = orjson.loads(event.data)["sid"]
                    break
        if not sid:
            raise EnvError("the ORS server's /create_session answer held no session id")
        return sid

    async def session_listing(self, sid: str) -> ToolListing:
        """An episode's tools: the env's, plus its task's (`/task_tools`; a server without it has none)."""
        try:
            listed = (await self.request("GET", f"/{self.env}/task_tools", sid)).json()
        except EnvError:  # an older server: no task tools
            return self.listing
        return self.listing.with_task_tools(listed.get("tools") or [])

    async def call(self, sid: str, name: str, arguments: dict) -> dict:
        """Run a tool; the RunToolOutput joined from the SSE chunks. An `error` event raises EnvError."""
        parts: list[str] = []
        async with self.http.stream("POST", f"/{self.env}/call", json={"name": name, "input": arguments},
                                    headers={"X-Session-ID": sid, "Accept": "text/event-stream"}) as response:
            if response.status_code >= 400:
                await response.aread()
                raise EnvError(f"the ORS server answered the call with HTTP {response.status_code}: "
                               f"{response.text[:300]}")
            async for event in EventSource(response).aiter_sse():
                if event.event == "error":
                    raise EnvError(f"the tool {name!r} raised on the ORS server: {event.data}")
                if event.event in ("chunk", "end"):
                    parts.append(event.data)
                if event.event == "end":
                    break
        return orjson.loads("".join(parts))


class _TaskSource:
    """The remote catalog as episode.tasks reads it: split entries, task counts and tasks."""

    def __init__(self, transport: OrsTransport) -> None:
        self.splits, self.num_tasks, self.transport = transport.split_entries, transport.num_tasks, transport

    async def tasks(self, split: str, window: range, reveal: bool) -> list[dict[str, Any]]:
        return await self.transport.tasks(split, window.start, window.stop)


class OrsSession(TransportSession):
    """One episode at a time on a remote ORS server."""

    def __init__(self, transport: OrsTransport) -> None:
        self.transport = transport
        self.id: str | None = None  # the ORS session id while an episode is open
        self.episode = Episode()
        self.listing = transport.listing  # the env's tools, plus the episode's task tools

    async def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[str, dict]:
        options = options or {}
        transport = self.transport
        check_options(options, KNOWN_OPTIONS, transport.env)
        limit = step_limit(options, transport.max_steps)
        secrets = secrets_of(options)
        await self.close()
        chosen = await choose_task(transport.catalog, transport.env, seed, options)
        headers = {"X-Secrets": secrets_header(secrets)} if secrets else {}
        sid = await transport.create_session()
        await transport.request("POST", "/create", sid, json={"env_name": transport.env, **chosen}, headers=headers)
        self.id = sid
        self.episode.begin(limit, episode_id_of(options))
        keep_alive.register(transport.url, sid)
        obs, images = render_blocks((await transport.request("GET", f"/{transport.env}/prompt", sid)).json())
        info: dict[str, Any] = {k: v for k, v in chosen.items() if k != TASK_SPEC}
        if images:
            info["images"] = images
        self.listing = await transport.session_listing(sid)
        info["tools"] = self.listing.tools
        if reveals_hidden(options):
            info[TASK_SPEC] = chosen.get(TASK_SPEC) or (await transport.tasks(
                chosen["split"], chosen["index"], chosen["index"] + 1))[0]
        return obs, info

    async def step(self, action: Action) -> StepTuple:
        self.episode.require_running("the session on the ORS server")
        call = self.listing.call_of(action)
        if isinstance(call, str):
            result = invalid_action(call)
        else:
            assert self.id is not None
            try:
                result = step_from_tool_result(await self.transport.call(self.id, call["name"], call["arguments"]))
            except EnvError:
                await self.close()  # the tool raised: the ORS session is dead
                raise
        truncated = self.episode.count(result.terminated, result.truncated)
        return result.obs, result.reward, result.terminated, truncated, result.info

    async def state(self) -> dict[str, Any]:
        return self.episode.state(self.id)

    async def close(self) -> None:
        """Delete the ORS session (if one is open). Idempotent."""
        sid, self.id = self.id, None
        self.episode.live = False
        if sid is not None:
            keep_alive.unregister(sid)
            with contextlib.suppress(Exception):
                await self.transport.request("POST", "/delete", sid)
                await self.transport.request("POST", "/delete_session", sid)

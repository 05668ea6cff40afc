"""Drive an existing ORS HTTP+SSE server (such as openreward's `Server`) with httpx.

    env = gym.make("openenv/ors", base_url="http://127.0.0.1:8080", env="counter")

reset: /create_session (an SSE or a JSON answer), /create with split+index (so this side never holds the
task spec) or a task_spec, then /{env}/prompt (503 "starting" is retried) and /{env}/task_tools.
step:  /{env}/call, its SSE answer joined from chunks; an `error` event (the tool raised) ends the session.
A ping keeps the session alive while the episode is open; close deletes it. Secrets go in X-Secrets.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import threading
import time
from typing import Any

import httpx
import orjson
from httpx_sse import EventSource

from openenv_gym.client.connection import StepTuple
from openenv_gym.environment import invalid_action
from openenv_gym.errors import BadRequestError, EnvError, NoEpisodeError, ServerUnreachableError
from openenv_gym.ors_common import render_blocks, split_entry, step_from_tool_result, tool_spec
from openenv_gym.task_choice import choose_task
from openenv_gym.toolcalls import find_tool_call

PING_INTERVAL = 10.0
STARTING_RETRIES = 300  # 503 "starting" answers ridden out (with their Retry-After) before giving up
DEFAULT_MAX_STEPS = 100


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


def _secrets_header(secrets: dict[str, str]) -> str:
    payload = {name: {"value": value, "allowed_domains": []} for name, value in secrets.items()}
    return base64.b64encode(orjson.dumps(payload)).decode()


class OrsHttpClient:
    """One ORS server and environment; makes sessions and answers catalog questions."""

    def __init__(self, base_url: str, env: str, *, max_steps: int = DEFAULT_MAX_STEPS,
                 timeout: float | None = 300.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.env = env.lower()
        self.max_steps = max_steps
        self.http = httpx.AsyncClient(base_url=self.base_url, timeout=timeout,
                                      limits=httpx.Limits(max_connections=None, max_keepalive_connections=1000))
        self.description: dict[str, Any] = {}
        self.tool_names: set[str] = set()
        self.terminal: dict | None = None

    async def request(self, method: str, path: str, sid: str | None = None, **kwargs: Any) -> httpx.Response:
        headers = kwargs.pop("headers", {}) | ({"X-Session-ID": sid} if sid else {})
        for _ in range(STARTING_RETRIES):
            try:
                response = await self.http.request(method, path, headers=headers, **kwargs)
            except httpx.TransportError as exc:
                raise ServerUnreachableError(f"cannot reach the ORS server at {self.base_url}: {exc}") from None
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

    async def open(self) -> OrsHttpClient:
        listed = (await self.request("GET", f"/{self.env}/tools")).json()
        tools = [tool_spec(t) for t in listed["tools"]]
        terminal = listed.get("terminal_tool")
        self.terminal = terminal
        self.tool_names = {t["name"] for t in tools} | ({terminal["name"]} if terminal else set())
        self.description = {"name": self.env, "description": f"{self.env} on the ORS server {self.base_url}",
                            "action": "tools", "tools": tools, "max_steps": self.max_steps, "source": "ors-http",
                            "terminal_tool": terminal}
        return self

    def session(self) -> OrsHttpSession:
        return OrsHttpSession(self)

    async def close(self) -> None:
        await self.http.aclose()

    # -- catalog (the TaskSource of ors_common) --------------------------------------------------

    async def splits(self) -> list[dict[str, str]]:
        return [split_entry(s) for s in (await self.request("GET", f"/{self.env}/splits")).json()]

    async def num_tasks(self, split: str) -> int:
        return int((await self.request("POST", f"/{self.env}/num_tasks", json={"split": split})).json()["num_tasks"])

    async def tasks(self, split: str, start: int | None = None, stop: int | None = None) -> list[dict]:
        body = {"split": split, "start": start, "stop": stop}
        return (await self.request("POST", f"/{self.env}/task_range", json=body)).json()["tasks"]

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


class OrsHttpSession:
    """One episode at a time on a remote ORS server, with the interface of client.Session."""

    def __init__(self, client: OrsHttpClient) -> None:
        self.client = client
        self.id: str | None = None  # the ORS session id while an episode is open
        self.live = False
        self.steps = 0
        self.limit = client.max_steps

    async def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[str, dict]:
        options = options or {}
        await self.close()
        client = self.client
        chosen = await choose_task(client, client.env, seed, options)
        secrets = options.get("secrets") or {}
        headers = {"X-Secrets": _secrets_header(secrets)} if secrets else {}
        sid = await client.create_session()
        await client.request("POST", "/create", sid, json={"env_name": client.env, **chosen}, headers=headers)
        self.id, self.live, self.steps = sid, True, 0
        self.limit = int(options.get("max_steps") or client.max_steps)
        keep_alive.register(client.base_url, sid)
        obs, images = render_blocks((await client.request("GET", f"/{client.env}/prompt", sid)).json())
        info: dict[str, Any] = {k: v for k, v in chosen.items() if k != "task_spec"}
        if images:
            info["images"] = images
        if options.get("expose_task"):
            info["task_spec"] = chosen.get("task_spec") or (await client.tasks(
                chosen["split"], chosen["index"], chosen["index"] + 1))[0]
        return obs, info

    async def step(self, action: Any) -> StepTuple:
        if not self.live or self.id is None:
            raise NoEpisodeError("no running episode on the ORS server (it ended, or was never reset); call reset")
        self.steps += 1
        truncated = self.steps >= self.limit
        call = find_tool_call(action, self.client.tool_names)
        terminal = self.client.terminal
        if isinstance(call, str) and isinstance(action, str) and terminal:
            call = {"name": terminal["name"], "arguments": {terminal["arg"]: action} if terminal.get("arg") else {}}
        if isinstance(call, str):
            result = invalid_action(call, truncated=truncated)
        else:
            try:
                result = step_from_tool_result(await self.client.call(self.id, call["name"], call["arguments"]),
                                               truncated)
            except EnvError:
                await self.close()  # the tool raised: the ORS session is dead
                raise
        if result.terminated or result.truncated:
            self.live = False
        return result.obs, result.reward, result.terminated, result.truncated, result.info

    async def close(self) -> None:
        """Delete the ORS session (if one is open). Idempotent."""
        sid, self.id, self.live = self.id, None, False
        if sid is not None:
            keep_alive.unregister(sid)
            with contextlib.suppress(Exception):
                await self.client.request("POST", "/delete", sid)
                await self.client.request("POST", "/delete_session", sid)

"""OpenEnv's side of the throughput comparison. Runs in its own venv with `openenv` installed.

    python openenv_peer.py --sessions 1024 --steps 20 [--workers 2 --async-env]
    python openenv_peer.py --sessions 1024 --steps 20 --url http://127.0.0.1:PORT --server-pid PID

With --url, OpenEnv's client drives a running server instead (OpenEnv's or ours: benchmarks/openenv_compare.py);
--server-pid is the process whose memory and threads are read.

Starts OpenEnv's own server (create_app + uvicorn) for a trivial echo environment with concurrent
sessions enabled, then drives it with OpenEnv's own client (GenericEnvClient, one WebSocket per
session, as OpenEnv works). Two set-ups: the template's (sync reset/step, one uvicorn worker) and
the tuned one (--async-env: reset_async/step_async overrides, OpenEnv's fastest path; --workers N).
Prints one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path


def _load_procinfo():
    """openenv_gym's /proc reader, loaded by path: this script runs in OpenEnv's venv, without openenv_gym."""
    path = Path(__file__).resolve().parent.parent / "openenv_gym" / "cli" / "procinfo.py"
    spec = importlib.util.spec_from_file_location("procinfo", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


procinfo = _load_procinfo()
tree_rss, tree_threads = procinfo.tree_rss, procinfo.tree_threads

MAX_SESSIONS_ENV = "OPENENV_PEER_MAX_SESSIONS"
ASYNC_ENV = "OPENENV_PEER_ASYNC"


def concurrent_env_base():
    """An OpenEnv Environment base class with concurrent sessions and the episode's State: subclasses call
    `self._begin(episode_id)` in reset and `self._count()` in step."""
    from openenv.core.env_server.interfaces import Environment
    from openenv.core.env_server.types import State

    class ConcurrentEnv(Environment):
        SUPPORTS_CONCURRENT_SESSIONS = True

        def __init__(self):
            super().__init__()
            self._begin(None)

        def _begin(self, episode_id):
            self._state = State(episode_id=episode_id, step_count=0)

        def _count(self):
            self._state.step_count += 1

        @property
        def state(self):
            return self._state

    return ConcurrentEnv


def make_app():
    """The app factory uvicorn imports in each worker."""
    from openenv.core.env_server.http_server import create_app
    from openenv.core.env_server.types import Action, Observation

    class EchoAction(Action):
        message: str

    class EchoObservation(Observation):
        echo: str = ""

    class EchoEnv(concurrent_env_base()):
        def reset(self, seed=None, episode_id=None, **kwargs):
            self._begin(episode_id)
            return EchoObservation(echo="Send me a message and I will echo it.")

        def step(self, action, timeout_s=None, **kwargs):
            self._count()
            return EchoObservation(echo=action.message, reward=len(action.message) / 10)

    class AsyncEchoEnv(EchoEnv):
        async def reset_async(self, seed=None, episode_id=None, **kwargs):
            return self.reset(seed, episode_id, **kwargs)

        async def step_async(self, action, timeout_s=None, **kwargs):
            return self.step(action)

    env_class = AsyncEchoEnv if os.environ.get(ASYNC_ENV) == "1" else EchoEnv
    return create_app(env_class, EchoAction, EchoObservation, env_name="echo",
                      max_concurrent_envs=int(os.environ[MAX_SESSIONS_ENV]))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def uvicorn_server(app: str, settings: dict[str, str], workers: int = 1) -> Iterator[tuple[subprocess.Popen, str]]:
    """OpenEnv's server for the app factory `app` ("module:function" in this folder), with `settings` in its
    environment: (process, URL) once it accepts connections, stopped on exit."""
    server, url = _start_uvicorn(app, settings, workers)
    try:
        yield server, url
    finally:
        server.terminate()
        server.wait(timeout=30)


def _start_uvicorn(app: str, settings: dict[str, str], workers: int) -> tuple[subprocess.Popen, str]:
    port = free_port()
    command = [sys.executable, "-m", "uvicorn", app, "--factory", "--host", "127.0.0.1",
               "--port", str(port), "--workers", str(workers), "--log-level", "warning", "--ws-max-queue", "64",
               "--backlog", "4096", "--app-dir", str(Path(__file__).parent)]
    server = subprocess.Popen(command, env=os.environ | settings)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return server, url
        except OSError:
            time.sleep(0.2)
    server.kill()
    raise SystemExit("the OpenEnv server did not start")


async def drive(url: str, sessions: int, steps: int, deadline_s: float, server_pid: int) -> dict:
    from openenv.core.generic_client import GenericEnvClient

    clients = [GenericEnvClient(base_url=url, message_timeout_s=deadline_s) for _ in range(sessions)]
    errors = 0
    opening = asyncio.Semaphore(256)

    async def open_one(client):
        nonlocal errors
        try:
            async with opening:
                await client.connect()
                await client.reset()
            return True
        except Exception:
            errors += 1
            return False

    ok = await asyncio.gather(*(open_one(c) for c in clients))
    live = [c for c, good in zip(clients, ok, strict=True) if good]
    rss_with_sessions, threads_with_sessions = tree_rss(server_pid), tree_threads(server_pid)
    latencies: list[float] = []
    done = 0

    async def run(client):
        nonlocal errors, done
        for _ in range(steps):
            start = time.perf_counter()
            try:
                await client.step({"message": "hi"})
            except Exception:
                errors += 1
                return
            latencies.append(time.perf_counter() - start)
            done += 1

    started = time.perf_counter()
    try:
        await asyncio.wait_for(asyncio.gather(*(run(c) for c in live)), deadline_s)
    except TimeoutError:
        errors += 1
    elapsed = time.perf_counter() - started
    await asyncio.gather(*(c.close() for c in live), return_exceptions=True)
    latencies.sort()
    pick = (lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000) if latencies else (
        lambda q: float("nan"))
    return {"steps_per_s": done / elapsed if elapsed else 0.0, "p50_ms": pick(0.5), "p99_ms": pick(0.99),
            "errors": errors, "sessions_open": len(live), "steps": done, "server_rss_sessions": rss_with_sessions,
            "server_threads_sessions": threads_with_sessions}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, required=True)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--async-env", action="store_true")
    parser.add_argument("--deadline", type=float, default=120.0)
    parser.add_argument("--url", help="drive this running server instead of starting OpenEnv's")
    parser.add_argument("--server-pid", type=int, help="with --url: the server's process")
    args = parser.parse_args()
    if args.url:
        idle = tree_rss(args.server_pid)
        result = asyncio.run(drive(args.url, args.sessions, args.steps, args.deadline, args.server_pid))
        print(json.dumps(result | {"server_rss_idle": idle}), flush=True)
        return
    settings = {MAX_SESSIONS_ENV: str(args.sessions), ASYNC_ENV: "1" if args.async_env else "0"}
    with uvicorn_server("openenv_peer:make_app", settings, args.workers) as (server, url):
        idle = tree_rss(server.pid)
        result = asyncio.run(drive(url, args.sessions, args.steps, args.deadline, server.pid))
        result["server_rss_idle"] = idle
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()

"""The embedded default: `gym.make(id)` without a base_url starts a local server for that env.

One server process per environment (and env_args, and sandbox), shared by every env made in this process, stopped at
exit. The server holds our end of a pipe as its stdin and stops when it closes, so it also goes away if this
process is killed. It reports its URL on a pipe of its own (protocol/ready.py); what it prints goes to our
stderr.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import subprocess
import sys
import threading
from collections import deque
from typing import Any

from openenv_gym.errors import ServerStartError
from openenv_gym.protocol.native import DEFAULT_MAX_SESSIONS
from openenv_gym.protocol.ready import read_status

START_TIMEOUT = 60.0  # seconds a server may take to start (building an environment's venv does not count)

_servers: dict[str, LocalServer] = {}
_MISSING = object()
_lock = threading.Lock()


OUTPUT_TAIL = 20  # lines of the server's output kept for the error of a server that does not start


def _forward(stream, tail: deque[str]) -> None:
    # A pipe nobody reads would fill up and block (or break) a chatty environment.
    for line in stream:
        tail.append(line)
        print(line, end="", file=sys.stderr)


class LocalServer:
    """`openenv-gym serve ENV` as a child process that dies with us: on a free loopback port by default."""

    def __init__(self, env: str, workers: int = 1, max_sessions: int = DEFAULT_MAX_SESSIONS, *extra_args: str,
                 host: str = "127.0.0.1", port: int = 0) -> None:
        self.env = env
        ready, report = os.pipe()
        command = [sys.executable, "-m", "openenv_gym", "serve", env, "--host", host, "--port", str(port),
                   "--workers", str(workers), "--max-sessions", str(max_sessions), "--exit-with-stdin",
                   "--ready-fd", str(report), *extra_args]
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True, pass_fds=(report,))
        os.close(report)
        self._tail: deque[str] = deque(maxlen=OUTPUT_TAIL)
        self._output = threading.Thread(target=_forward, args=(self.process.stdout, self._tail),
                                        name="server-output", daemon=True)
        self._output.start()
        self.status: dict[str, Any] = {}  # its ready line: the URL, its workers, the Verifiers front end's address
        self.url = self._wait_for_url(ready)

    def _wait_for_url(self, ready: int) -> str:
        with os.fdopen(ready, "rb", buffering=0) as pipe:  # unbuffered: select() sees every line
            timeout: float | None = START_TIMEOUT
            while select.select([pipe], [], [], timeout)[0]:
                line = pipe.readline()
                if not line:  # the server exited
                    break
                status = read_status(line)
                if "ready" in status:
                    self.status = status
                    return status["ready"]
                timeout = None if "building" in status else START_TIMEOUT  # pip has timeouts of its own
        self.stop()
        self._output.join(timeout=2)  # the rest of what it printed
        output = "".join(self._tail).strip() or "(it printed nothing)"
        raise ServerStartError(
            f"the local server for {self.env!r} did not start (not ready within {START_TIMEOUT:g} s, or exited "
            f"with code {self.process.returncode}). The end of its output:\n{output}\nRun `openenv-gym serve "
            f"{self.env}` to see it all, or pass base_url= to use a running server")

    def __enter__(self) -> LocalServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    @property
    def output(self) -> str:
        """The end of what the server printed so far (its start-up line, its errors)."""
        return "".join(self._tail)

    def stop(self) -> None:
        if self.process.stdin is not None and not self.process.stdin.closed:
            self.process.stdin.close()  # the server stops when its stdin closes
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._output.join(timeout=1)  # the server's output read to its end
        if not self._output.is_alive() and self.process.stdout is not None:
            self.process.stdout.close()  # else it is closed when collected, with a ResourceWarning wherever that is


def local_server_url(env: str, workers: int = 1, max_sessions: int = DEFAULT_MAX_SESSIONS,
                     env_args: dict[str, Any] | None = None, sandbox: bool = True) -> str:
    """The URL of this process's local server for `env` (built with `env_args`; sandbox=False: served
    --no-sandbox, its programs unconfined), started on first use."""
    extra = (("--env-args", json.dumps(env_args, sort_keys=True)) if env_args else ()) + (
        () if sandbox else ("--no-sandbox",))
    key = " ".join((env, *extra))
    with _lock:
        server = _servers.get(key)
        if server is None or not server.alive:
            server = _servers[key] = LocalServer(env, workers, max_sessions, *extra)
        return server.url


def check_env_args(description: dict[str, Any], env_args: dict[str, Any] | None, url: str) -> None:
    """A running server was built with its own env_args: refuse to pretend it runs the ones asked for."""
    served = description.get("env_args") or {}
    differing = {key: value for key, value in (env_args or {}).items() if served.get(key, _MISSING) != value}
    if differing:
        raise ValueError(
            f"the server at {url} runs {description.get('name')!r} with env_args {json.dumps(served)}, not "
            f"{json.dumps(differing)}; start a server with them (openenv-gym serve NAME --env-args "
            f"'{json.dumps(env_args)}') or leave out base_url to get a local one")


@atexit.register
def stop_local_servers() -> None:
    with _lock:
        servers = list(_servers.values())
        _servers.clear()
    for server in servers:
        server.stop()

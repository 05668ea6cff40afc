"""OpenEnv's own server for an OpenEnv project folder (server/app.py), run by uvicorn from the project's venv.

    with openenv_server(project, python, max_sessions=64) as (url, pid): ...

The project's app reads MAX_CONCURRENT_ENVS, as OpenEnv's envs do. Used by the tests (our openenv/remote
against OpenEnv's server) and by benchmarks/openenv_compare.py (the anchor).
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from benchmarks.ors_compare import free_port


@contextlib.contextmanager
def openenv_server(project: Path, python: Path, max_sessions: int, workers: int = 1) -> Iterator[tuple[str, int]]:
    """(http://127.0.0.1:PORT, the server's pid) once OpenEnv's server of `project` accepts connections; stopped on
    exit."""
    port = free_port()
    command = [str(python), "-m", "uvicorn", "server.app:app", "--host", "127.0.0.1", "--port", str(port),
               "--workers", str(workers), "--log-level", "warning", "--backlog", "4096"]
    server = subprocess.Popen(command, cwd=project, env=os.environ | {"MAX_CONCURRENT_ENVS": str(max_sessions)})
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"OpenEnv's server for {project} did not start") from None
                time.sleep(0.2)
        yield f"http://127.0.0.1:{port}", server.pid
    finally:
        server.terminate()
        server.wait(timeout=30)

"""Real servers on loopback, started as `openenv-gym serve` subprocesses."""

from __future__ import annotations

import asyncio
import os
import tempfile
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

# Imports in the tests go to a home of their own, never the user's ~/.openenv_gym; the environments'
# venvs (real openreward / ors-sdk installs) are kept in the checkout, so later runs reuse them.
os.environ["OPENENV_GYM_HOME"] = tempfile.mkdtemp(prefix="openenv-gym-home-")
os.environ.setdefault("OPENENV_GYM_VENVS", str(Path(__file__).parent.parent / ".venv-envs"))

from openenv_gym.embedded import LocalServer

TEST_ENVS = Path(__file__).parent / "envs"


def env_path(name: str) -> str:
    return str(TEST_ENVS / name)


def http_url(ws_url: str) -> str:
    return "http://" + ws_url.removeprefix("ws://")


def health(ws_url: str) -> dict:
    return httpx.get(http_url(ws_url) + "/healthz", timeout=5).json()


def wait_until(predicate: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def write_files(folder: Path, files: dict[str, str]) -> Path:
    """Write {relative path: text} under folder (text is dedented); return folder."""
    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return folder


def run(coro):
    return asyncio.run(coro)


@pytest.fixture
def start_server() -> Iterator[Callable[..., str]]:
    """Start a server for one test: start_server("echo", "--max-sessions", "3") -> ws url."""
    servers: list[LocalServer] = []

    def start(env: str, *args: str, workers: int = 1, max_sessions: int = 1000) -> str:
        server = LocalServer(env, workers, max_sessions, *args)
        servers.append(server)
        return server.url

    yield start
    for server in servers:
        server.stop()


@pytest.fixture(scope="session")
def echo_url() -> Iterator[str]:
    server = LocalServer("echo", 1, 10_000)
    yield server.url
    server.stop()


@pytest.fixture(scope="session")
def faulty_url() -> Iterator[str]:
    server = LocalServer(env_path("faulty"), 1, 10_000, "--step-timeout", "0.5", "--max-frame-bytes", "4096")
    yield server.url
    server.stop()

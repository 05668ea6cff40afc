"""openenv_gym.serve(): the serving API the CLI is a layer over, its ready report, and the venv it runs an
imported environment in."""

import os
import select
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, run

import openenv_gym
from openenv_gym.importers import import_environment
from openenv_gym.manifests import load_manifest
from openenv_gym.manifests.venvs import venv_path
from openenv_gym.protocol.ready import read_status

ANSWER_ENV = ROOT / "tests" / "ors_envs" / "answer"


def serve_in_a_child(env: str, timeout: float = 120) -> tuple[subprocess.Popen, str]:
    """openenv_gym.serve() called as an API in a fresh interpreter; it prints the URL from on_ready."""
    code = (f"import openenv_gym\n"
            f"openenv_gym.serve({env!r}, port=0, workers=1, on_ready=lambda url: print(url, flush=True))\n")
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert select.select([child.stdout], [], [], timeout)[0], "the server did not report ready in time"
    return child, child.stdout.readline().strip()


async def one_step(url: str) -> str:
    async with openenv_gym.connect(url) as conn:
        session = conn.session()
        await session.reset(options={"index": 0} if "ors" in url else None)
        return (await session.step("echo me"))[0]


def stop(child: subprocess.Popen) -> int:
    child.send_signal(signal.SIGTERM)
    return child.wait(timeout=30)


def test_serve_is_an_api_with_a_ready_callback():
    child, url = serve_in_a_child("echo")
    try:
        assert url.startswith("ws://127.0.0.1:") and run(one_step(url)) == "echo me"
    finally:
        assert stop(child) == 0


def test_the_ready_report_is_json_on_the_pipe_it_was_given():
    ready, report = os.pipe()
    child = subprocess.Popen([sys.executable, "-m", "openenv_gym", "serve", "echo", "--port", "0", "--workers", "2",
                              "--ready-fd", str(report)], pass_fds=(report,), stdout=subprocess.PIPE, text=True)
    os.close(report)
    try:
        with os.fdopen(ready, "rb") as pipe:
            status = read_status(pipe.readline())
            assert pipe.read() == b""  # nothing after the ready line: the server closed its end
        assert status["ready"].startswith("ws://127.0.0.1:") and status["workers"] == 2 and status["pid"] == child.pid
        assert run(one_step(status["ready"])) == "echo me"
    finally:
        assert stop(child) == 0
    assert child.stdout.read() == ""  # with a ready pipe, nothing is printed: the embedded default stays quiet


@pytest.mark.env_venvs(ANSWER_ENV)
def test_an_imported_env_is_served_from_its_own_venv(tmp_path):
    (imported,) = import_environment(ANSWER_ENV, "served", tmp_path)
    venv = venv_path(load_manifest(imported.folder))
    child, url = serve_in_a_child(str(imported.folder))
    try:
        async def answer() -> tuple[str, float]:
            async with openenv_gym.connect(url) as conn:
                session = conn.session()
                obs, _ = await session.reset(options={"split": "train", "index": 1})
                return obs, (await session.step({"name": "answer", "arguments": {"answer": "42"}}))[1]

        assert run(answer()) == ("What is 7 * 6?", 1.0)
        servers = [pid for pid in _children(child.pid) if str(venv) in _cmdline(pid)]
        assert servers, "the server runs in a child process with the environment's venv python"
    finally:
        assert stop(child) == 0  # the signal reaches the server in the venv too
    assert all(not Path(f"/proc/{pid}").exists() for pid in servers)


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(child) for child in (task / "children").read_text().split()]
    return found


def _cmdline(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()

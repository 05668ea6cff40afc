"""An environment of openenv_gym's own interface that runs code (`runs_code = true`): the commands its
Environment.run_code runs are each episode's, in a sandbox of its own, checked from the host, never by what the
episode prints of itself. Real parts: bubblewrap, control groups, a served environment on loopback."""

import asyncio
import os
import shutil
import time
from pathlib import Path

import pytest
from conftest import ROOT, descendants

import openenv_gym
from openenv_gym.client.local import LocalServer

CODE_RUNNER = ROOT / "tests" / "sandbox_envs" / "code_runner"


@pytest.fixture(scope="module")
def served():
    server = LocalServer(str(CODE_RUNNER), 1, 20)
    yield server
    server.stop()


async def _episodes(url: str, *episodes: list[str]) -> list[list[tuple]]:
    """Each episode's commands, one session: every step's (obs, reward, terminated, truncated, info)."""
    async with openenv_gym.connect(url) as conn:
        session = conn.session()
        played = []
        for commands in episodes:
            await session.reset()
            played.append([await session.step(command) for command in commands])
        await session.close()
        return played


def play(url: str, *episodes: list[str]) -> list[list[tuple]]:
    return asyncio.run(_episodes(url, *episodes))


def _sandboxed_sleeps(server: LocalServer) -> list[int]:
    """The uids of the server's processes that run `sleep 77` (the episodes' marker)."""
    found = []
    for pid in descendants(server.process.pid):
        try:
            if Path(f"/proc/{pid}/cmdline").read_bytes() == b"sleep\0" + b"77\0":
                found.append(int(Path(f"/proc/{pid}/status").read_text().split("Uid:")[1].split()[0]))
        except OSError:
            continue
    return found


def test_run_code_runs_the_episodes_commands_in_its_sandbox(served, tmp_path):
    secret = Path(os.environ["OPENENV_GYM_HOME"]) / "code-secret.txt"
    secret.write_text("code-secret-3141")
    outside = tmp_path / "written-by-the-code"
    [steps] = play(served.url, [f"cat {secret}", f"echo pwned > {outside}", "(setsid sleep 77 >/dev/null 2>&1 &)",
                                "ps -e | wc -l; pwd; id -u", "exit"])
    uids = _sandboxed_sleeps(served)
    said = [step[0] for step in steps]
    assert "code-secret-3141" not in "".join(said) and not outside.exists()
    lines = said[3].split("\n")
    assert int(lines[1]) < 10 and lines[2] == "/tmp/work"  # its own processes only, its own working directory
    assert uids == [] or all(uid not in (0, os.getuid()) for uid in uids)
    deadline = time.monotonic() + 5  # (the episode ended: its processes are killed as its sandbox is renewed)
    while _sandboxed_sleeps(served) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _sandboxed_sleeps(served) == []


def test_files_stay_for_the_episode_and_are_gone_in_the_next_and_a_timeout_kills(served):
    first, second = play(served.url, ["file notes.txt kept-2718", "cat notes.txt", "sleep 20; echo late"],
                         ["ls -A"])
    assert first[0][0] == "exit 0\nkept-2718" and first[1][0] == "exit 0\nkept-2718"
    assert first[2][4]["timed_out"] and "late" not in first[2][0]
    assert set(second[0][0].split("\n")[1:]) == {".run.stdout", ".run.stderr", ".stdin", ""}  # (this command's own)


def test_a_file_name_outside_the_working_directory_is_refused(served):
    with pytest.raises(openenv_gym.EnvError, match="run_code's files are named inside the working directory"):
        play(served.url, ["file ../../etc/passwd pwned"])


def test_run_code_without_runs_code_says_what_to_declare(tmp_path):
    folder = tmp_path / "code_runner"
    shutil.copytree(CODE_RUNNER, folder)
    manifest = folder / "openenv.toml"
    manifest.write_text(manifest.read_text().replace("runs_code = true", "runs_code = false"))
    server = LocalServer(str(folder), 1, 5)
    try:
        with pytest.raises(openenv_gym.EnvError, match=r"add runs_code = true to its openenv\.toml"):
            play(server.url, ["echo hi"])
    finally:
        server.stop()


def test_without_bubblewrap_it_is_refused_unless_told_no_sandbox(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(openenv_gym.ServerStartError, match=r"(?s)code_runner runs programs.*"
                                                             r"bubblewrap \(bwrap\) is not installed.*--no-sandbox"):
        LocalServer(str(CODE_RUNNER), 1, 5)
    server = LocalServer(str(CODE_RUNNER), 1, 5, "--no-sandbox")
    try:
        [steps] = play(server.url, [f"echo unconfined > {tmp_path / 'written'}; echo done"])
    finally:
        server.stop()
    assert steps[0][0].endswith("done\n") and (tmp_path / "written").read_text() == "unconfined\n"

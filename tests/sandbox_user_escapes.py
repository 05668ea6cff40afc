"""The six escapes of the sandbox's tests, tried by a server an ordinary user runs, and checked from outside by this
process, which is that user's too (test_sandbox_user.py runs it with runuser, in a venv of /usr/bin/python3): the
secret files, the bystander process and the listener it makes all belong to the same user as the server and its
episodes. It prints what it found as JSON, for the test to judge (assert_contained):

    python sandbox_user_escapes.py SHELL_ENV_FOLDER WORK_FOLDER
"""

import asyncio
import contextlib
import json
import os
import shlex
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import openenv_gym
from openenv_gym.cli.procinfo import tree
from openenv_gym.client.local import LocalServer

PYTHON = sys.executable


def cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:  # (it ended)
        return b""


def status(pid: int, field: str) -> str:
    return Path(f"/proc/{pid}/status").read_text().split(f"{field}:")[1].split("\n")[0].strip()


class Listener:
    """The user's own TCP listener on the host's loopback, counting who connects."""

    def __init__(self) -> None:
        self.socket = socket.create_server(("127.0.0.1", 0))
        self.socket.settimeout(0.1)
        self.port, self.accepted, self.open = self.socket.getsockname()[1], 0, True
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while self.open:
            try:
                self.socket.accept()[0].close()
                self.accepted += 1
            except OSError:
                continue

    def close(self) -> None:
        self.open = False
        self.thread.join()
        self.socket.close()


async def play(url: str, server_pid: int, shell: Path, work: Path, found: dict) -> None:
    home = Path.home()
    secrets = {home / ".escape-secret": "home-secret-4711", Path(os.environ["OPENENV_GYM_HOME"]) / "secret":
               "gym-home-secret-4712", work / "secret": "tmp-secret-4713"}
    for path, text in secrets.items():
        path.write_text(text)
        path.chmod(0o600)
    targets = [home / "escaped", Path(os.environ["OPENENV_GYM_HOME"]) / "escaped", work / "escaped",
               shell / "escaped", Path(sys.prefix) / "escaped"]
    bystander = subprocess.Popen(["sleep", "313"])
    listener = Listener()
    reach = f"import socket; socket.create_connection(('127.0.0.1', {listener.port}), 3)"
    connect = f"{PYTHON} -c {shlex.quote(reach)}"
    try:
        async with openenv_gym.connect(url) as conn:
            a, b = conn.session(), conn.session()
            for session in (a, b):
                await session.reset(options={"index": 0})
            said = [(await a.step(command))[0] for command in (
                *(f"cat {path}" for path in secrets), *(f"echo pwned > {path}" for path in targets),
                "echo alpha-marker-2718 > note.txt; (sleep 611 >/dev/null 2>&1 &); sleep 0.3; echo started",
                connect, "ps -eo pid,user,args", "id; grep Cap /proc/self/status")]
            found["episode_processes"] = [
                {"uid": int(status(pid, "Uid").split()[0]), "caps": status(pid, "CapEff")}
                for pid in tree(server_pid) if cmdline(pid) == b"sleep\x00611\x00"]
            seen_by_b = [(await b.step(command))[0] for command in (
                "cat /tmp/work/note.txt; ls -a /tmp /tmp/work", "ps -eo pid,args",
                f"kill -9 {bystander.pid} {server_pid} {os.getpid()}; pkill -9 -f sleep; kill -9 -1; echo tried")]
            still = (await a.step("cat note.txt; ps -eo args"))[0]
            found["node"] = (await a.step("node -e 'WebAssembly.instantiate(new Uint8Array([0,97,115,109,1,0,0,0,5,"
                                          "3,1,0,1])).then(() => console.log(\"wasm ok\"))'"))[0]
            found["too_much"] = (await a.step(f"{PYTHON} -c 'b = bytearray(700 << 20)'"))[0]  # (its bound: 512 MiB)
            for session in (a, b):
                await session.close()
        time.sleep(0.3)
        found.update(
            secrets_leaked=[text for text in secrets.values() if text in "".join(said + seen_by_b)],
            written_outside=[str(path) for path in targets if path.exists()],
            listener_accepted=listener.accepted, connect=said[len(secrets) + len(targets) + 1],
            other_session_read="alpha-marker-2718" in "".join(seen_by_b),
            other_session_processes="sleep 611" in seen_by_b[1],
            process_table=said[-2], identity=said[-1], a_after_b=still,
            bystander_alive=bystander.poll() is None, checker_alive=True)
    finally:
        listener.close()
        bystander.kill()
        for path in [*secrets, *targets]:
            with contextlib.suppress(OSError):  # (not there; or on a read-only mount, as in a container)
                path.unlink()


def assert_contained(found: dict) -> None:
    """The six escapes, each seen from outside."""
    assert found["secrets_leaked"] == []  # host files: the user's home, the server's home, /tmp
    assert found["written_outside"] == []  # writes outside its own folders
    assert not found["other_session_read"]  # another session's files...
    assert not found["other_session_processes"]  # ...and processes
    assert "alpha-marker-2718" in found["a_after_b"] and "sleep 611" in found["a_after_b"]  # b's kill -9 -1 missed
    assert found["listener_accepted"] == 0 and "ConnectionRefusedError" in found["connect"]  # the network
    assert found["bystander_alive"] and found["server_alive"]  # killing a process of the user's
    assert "sleep 313" not in found["process_table"] and "openenv_gym serve" not in found["process_table"]
    assert found["node"].endswith("wasm ok\n")  # (WebAssembly reserves address space: its memory bound lets it be)
    assert all(process["caps"] == "0000000000000000" for process in found["episode_processes"])


def main() -> None:
    shell, work = Path(sys.argv[1]), Path(sys.argv[2])
    found: dict = {"checker_uid": os.getuid()}
    server = LocalServer(str(shell), 1, 100)
    try:
        found["server_uid"] = int(status(server.process.pid, "Uid").split()[0])
        asyncio.run(play(server.url, server.process.pid, shell, work, found))
        found["server_alive"] = server.alive
        found["server_said"] = server.output
    finally:
        server.stop()
    print(json.dumps(found))


if __name__ == "__main__":
    main()

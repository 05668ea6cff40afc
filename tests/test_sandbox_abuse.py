"""Issue 37, item 5: the worst a weak policy sends, each attack by one episode of the shell agent (each model reply
run as a shell command in its sandbox) while a bystander session on the same server (one worker) keeps stepping.

After each attack: the bystander's every answer was right and none was an error; the server lives and serves a
fresh episode, whose sandbox holds nothing of the attacker's; nothing of the attacker is left (no process of its uid
anywhere on the host, its control groups gone or empty, the server's processes and control groups back to their
idle count); the host's files are as they were. Every effect is checked from the host (/proc, the control groups,
a listener), never by trusting what the episode prints, but for what it could read: its output is what the policy
learns, so a secret in it has leaked.

Real parts: bubblewrap's namespaces, the kernel's control groups and rlimits, a real server and its programs on
loopback."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, Listener, descendants

import openenv_gym
from openenv_gym.client.local import LocalServer
from openenv_gym.sandbox import unavailable
from openenv_gym.sandbox.pool import IDLE_SECONDS

SHELL = ROOT / "tests" / "sandbox_envs" / "shell"
LIMITS = tomllib.loads((SHELL / "openenv.toml").read_text())["limits"]
OPEN_FILES = LIMITS.get("open_files", 1024)  # (the manifest's, else AgentLimits' default)
PYTHON = sys.executable  # the env's interpreter: its venv is shown, read-only, in every sandbox
MARKER = "bystander-marker-8675309"  # in the bystander's working directory
SECRET = "server-credential-31337"  # in the server's environment, as a user's credentials are...
URL_SECRET = "index-password-27182"  # ...and as one is in a URL (a private package index's, say)
SERVER_ENVIRONMENT = {"AWS_SECRET_ACCESS_KEY": SECRET,
                      "PIP_INDEX_URL": f"https://deploy:{URL_SECRET}@pypi.example.com/simple"}
HOST_MARKER = "host-marker-2718"  # in files of the host's that no episode may change
STEP_TIMEOUT = 60.0  # seconds any one step may take (the agent's own command timeout is 20 s)
SETTLE = 20.0  # seconds the server has to go back to idle after an attack (a kept sandbox expires in a few)
GROUP_ROOTS = (Path("/sys/fs/cgroup/pids/openenv-gym"), Path("/sys/fs/cgroup/memory/openenv-gym"),
               Path("/sys/fs/cgroup/openenv-gym"))


# -- what the host sees ------------------------------------------------------------------------------------------

def uid_of(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("Uid:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def episodes(server: LocalServer) -> dict[int, list[int]]:
    """The server's episode processes by uid (an episode's uid is its own: not the server's)."""
    found: dict[int, list[int]] = {}
    server_uid = uid_of(server.process.pid)
    for pid in descendants(server.process.pid):
        uid = uid_of(pid)
        if uid is not None and uid != server_uid:
            found.setdefault(uid, []).append(pid)
    return found


def processes_of(uid: int) -> list[int]:
    """Every process of the host's that runs as `uid`, wherever it hangs."""
    return [int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit() and uid_of(int(entry.name))
            == uid]


def new_uid(server: LocalServer, known: set[int]) -> int:
    """The uid of the episode that was just reset, the only one the server runs beside `known`."""
    [uid] = set(episodes(server)) - known
    return uid


def root_of(server: LocalServer, uid: int) -> Path:
    """The root of the sandbox of episode `uid`, as the host reaches it (while one of its processes lives)."""
    return Path(f"/proc/{min(episodes(server)[uid])}/root")


def control_groups_of(pid: int) -> list[Path]:
    """The episode control groups process `pid` is in (v1: /sys/fs/cgroup/<controller>/..., v2: /sys/fs/cgroup/...)."""
    groups = []
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "openenv-gym" in path:
            groups += [Path("/sys/fs/cgroup", name, path.lstrip("/")) for name in controllers.split(",")] \
                if controllers else [Path("/sys/fs/cgroup", path.lstrip("/"))]
    return groups


def group_pids(group: Path) -> list[int]:
    try:
        return [int(line) for line in (group / "cgroup.procs").read_text().split()]
    except FileNotFoundError:
        return []


def counts(server: LocalServer) -> tuple[int, int]:
    """(the server's processes, its workers' episode control groups: named `<worker pid>-<uid>`)"""
    processes = descendants(server.process.pid)
    workers = {server.process.pid, *processes}
    groups = sum(1 for root in GROUP_ROOTS if root.is_dir() for group in root.glob("*-*")
                 if group.name.split("-")[0].isdigit() and int(group.name.split("-")[0]) in workers)
    return len(processes), groups


def open_fds(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def hard_limit(pid: int, name: str) -> int | None:
    """A process's hard limit `name` ("Max processes"), from /proc; None if it is gone."""
    try:
        lines = Path(f"/proc/{pid}/limits").read_text().splitlines()
    except OSError:
        return None
    return next(int(line[len(name):].split()[1]) for line in lines if line.startswith(name))


def in_sandbox(pid: int) -> bool:
    """Whether process `pid` is in a PID namespace of its own (not the host's, which the tests run in)."""
    try:
        return os.readlink(f"/proc/{pid}/ns/pid") != os.readlink("/proc/self/ns/pid")
    except OSError:
        return False


def ignores_sigterm(pid: int) -> bool:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("SigIgn:"):
                return bool(int(line.split()[1], 16) & (1 << (signal.SIGTERM - 1)))
    except OSError:
        pass
    return False


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def host_state(markers: list[Path]) -> dict[str, Any]:
    """What an escaped `rm -rf` or write would change: the env's folder, the venv, the server's home and the host's
    files, each marker's text."""
    venv = Path(sys.prefix)
    site = next(venv.glob("lib/python*/site-packages"))
    return {"env folder": {str(path.relative_to(SHELL)): digest(path) for path in sorted(SHELL.rglob("*"))
                           if path.is_file() and "__pycache__" not in path.parts},
            "venv": {"bin": sorted(os.listdir(venv / "bin")), "pyvenv.cfg": digest(venv / "pyvenv.cfg"),
                     "site-packages": sorted(os.listdir(site)), "python": os.path.realpath(PYTHON)},
            "host": {path: digest(Path(path)) for path in ("/etc/passwd", "/etc/hostname", "/bin/sh")},
            "markers": {str(path): path.read_text() if path.exists() else None for path in markers}}


def outside_addresses() -> list[str]:
    """The host's own address on its way out, if it has one (a connect to it from a sandbox must go nowhere)."""
    found = []
    for family, far in ((socket.AF_INET, "192.0.2.123"), (socket.AF_INET6, "2001:db8::1")):
        with contextlib.suppress(OSError), socket.socket(family, socket.SOCK_DGRAM) as probe:
            probe.connect((far, 9))  # (UDP: nothing is sent, the route is looked up)
            found.append(probe.getsockname()[0])
    return found



# -- the server, the bystander, the attacker --------------------------------------------------------------------

class Served:
    """The server every attack is made on (one worker), started again if an attack ended it (that test fails)."""

    def __init__(self, markers: list[Path]) -> None:
        self.server: LocalServer | None = None
        self.idle = (0, 0)
        self.markers = markers

    def ensure(self) -> LocalServer:
        if self.server is None or not self.server.alive:
            if self.server is not None:
                self.server.stop()
            os.environ.update(SERVER_ENVIRONMENT)  # the server's environment only (it inherits ours)
            try:
                self.server = LocalServer(str(SHELL), 1, 100)
            finally:
                for name in SERVER_ENVIRONMENT:
                    del os.environ[name]
            self.idle = self._idle()
        return self.server

    def _idle(self) -> tuple[int, int]:
        """The counts of the server at rest, after episodes of the attacks' shape (two at once, then two more):
        measured once they stop changing for longer than a used sandbox is kept for reuse."""
        assert self.server is not None

        async def warm() -> None:
            await asyncio.gather(*(play(self.server, ["echo warm"]) for _ in range(2)))
            await asyncio.gather(*(play(self.server, ["echo warm"]) for _ in range(2)))
        asyncio.run(warm())
        deadline, stable_since, last = time.monotonic() + 30, time.monotonic(), counts(self.server)
        while time.monotonic() - stable_since < 2 * IDLE_SECONDS + 0.5 and time.monotonic() < deadline:
            time.sleep(0.1)
            if (now := counts(self.server)) != last:
                stable_since, last = time.monotonic(), now
        return last

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()


async def play(server: LocalServer, commands: list[str]) -> list[tuple]:
    """One episode on a connection of its own: each command's answer, then `exit`'s."""
    async with openenv_gym.connect(server.url) as conn:
        session = conn.session()
        try:
            await session.reset(options={"index": 0})
            return [await asyncio.wait_for(session.step(command), STEP_TIMEOUT) for command in [*commands, "exit"]]
        finally:
            await session.close()


@dataclass
class Bystander:
    """A well-behaved session beside the attacker: `echo n` in a loop, and now and then `cat` of its own marker."""

    server: LocalServer
    uid: int = 0
    steps: int = 0
    errors: list[str] = field(default_factory=list)
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    stop: asyncio.Event = field(default_factory=asyncio.Event)

    async def run(self) -> None:
        try:
            async with openenv_gym.connect(self.server.url) as conn:
                session = conn.session()
                known = set(episodes(self.server))
                await session.reset(options={"index": 0})
                self.uid = new_uid(self.server, known)
                await self._expect(session, f"echo {MARKER} > note.txt && cat note.txt", MARKER)
                self.ready.set()
                n = 0
                while not self.stop.is_set() and not self.errors:
                    n += 1
                    await (self._expect(session, "cat note.txt", MARKER) if n % 8 == 0 else
                           self._expect(session, f"echo {n}", str(n)))
                obs, _, terminated, truncated, info = await asyncio.wait_for(session.step("exit"), STEP_TIMEOUT)
                if not terminated or truncated or "error" in info:
                    self.errors.append(f"exit -> {obs!r}, {info.get('error')}")
                await session.close()
        except Exception as exc:
            self.errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            self.ready.set()

    async def _expect(self, session: Any, command: str, printed: str) -> None:
        obs, _, terminated, truncated, info = await asyncio.wait_for(session.step(command), STEP_TIMEOUT)
        self.steps += 1
        if obs != f"exit 0\n{printed}\n" or terminated or truncated or "error" in info:
            self.errors.append(f"{command!r} -> {obs!r}, ended: {terminated or truncated}, {info.get('error')}")

    def note(self) -> str | None:
        """Its marker file, read from the host."""
        for pid in sorted(episodes(self.server).get(self.uid, [])):
            with contextlib.suppress(FileNotFoundError):  # (a process of its command, ended meanwhile)
                return (Path(f"/proc/{pid}/root/tmp/work/note.txt")).read_text().strip()
        return None


@dataclass
class Attacker:
    """The attacking episode: its session, and its uid (found from the host as the episode's processes')."""

    session: Any
    server: LocalServer
    uid: int
    bystander: Bystander
    ended: dict | None = None  # the info of the step that ended its episode
    groups: list[Path] = field(default_factory=list)  # its control groups (from /proc, while it runs)
    seen: dict[str, Any] = field(default_factory=dict)  # what the attack measured from the host

    async def run(self, command: str) -> str:
        assert self.ended is None, f"the attacker's episode ended already: {self.ended}"
        obs, _, terminated, truncated, info = await asyncio.wait_for(self.session.step(command), STEP_TIMEOUT)
        if terminated or truncated:
            self.ended = info
        return obs

    def pids(self) -> list[int]:
        return processes_of(self.uid)

    def inside(self) -> list[int]:
        """Its processes in the sandbox's PID namespace (the one that entered it waits outside, running nothing)."""
        return [pid for pid in self.pids() if in_sandbox(pid)]

    def root(self) -> Path:
        return root_of(self.server, self.uid)


Attack = Callable[[Attacker], Awaitable[None]]


def abuse(served: Served, attack: Attack) -> Attacker:
    """Run `attack` in an episode while the bystander steps beside it, close the episode, and check what must hold
    after any attack; the attacker, for the attack's own checks."""
    server = served.ensure()
    before = host_state(served.markers)
    bystander = Bystander(server)

    async def main() -> Attacker:
        beside = asyncio.create_task(bystander.run())
        await bystander.ready.wait()
        assert bystander.errors == [], bystander.errors
        async with openenv_gym.connect(server.url) as conn:
            session = conn.session()
            known = set(episodes(server))
            await session.reset(options={"index": 0})
            attacker = Attacker(session, server, new_uid(server, known), bystander)
            attacker.groups = control_groups_of(min(attacker.pids()))
            steps = bystander.steps
            try:
                await attack(attacker)
                deadline = time.monotonic() + STEP_TIMEOUT  # (a quick attack: the bystander steps beside what it left)
                while bystander.steps < steps + 2 and not beside.done() and time.monotonic() < deadline:
                    await asyncio.sleep(0.01)
                attacker.seen["bystander_note"] = bystander.note()
            finally:
                attacker.seen["bystander_steps"] = bystander.steps - steps
                with contextlib.suppress(Exception):  # (a session whose step is still pending is closed all the same)
                    await session.close()
        target = bystander.steps + 3  # a few steps more, after the attacker's episode closed
        while bystander.steps < target and not beside.done():
            await asyncio.sleep(0.01)
        bystander.stop.set()
        await beside
        return attacker

    attacker = asyncio.run(main())
    assert bystander.errors == []
    assert attacker.seen["bystander_steps"] >= 2  # it stepped beside the attack
    assert attacker.seen["bystander_note"] == MARKER  # its files untouched, seen from the host
    assert server.alive
    # two fresh episodes at once (where sandboxes are kept for reuse, one is in the attacker's, made as new): each
    # is served, and its sandbox holds nothing of the attacker's
    for fresh in asyncio.run(fresh_episodes(server, 2)):
        assert fresh["answers"] == ["exit 0\nfresh\n"] and fresh["ended"] == (True, None)
        assert fresh["files"]["tmp"] == ["work"] and fresh["files"]["dev/shm"] == []
        assert set(fresh["files"]["tmp/work"]) <= {".stdout", ".stderr", ".stdin"}
    deadline = time.monotonic() + SETTLE
    while (counts(server) != served.idle or attacker.pids()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert attacker.pids() == []  # none of its processes, anywhere on the host
    assert counts(server) == served.idle  # the server's processes and episode control groups, back to idle
    assert [group for group in attacker.groups if group_pids(group)] == []  # (gone, or kept empty for reuse)
    assert host_state(served.markers) == before
    return attacker


def _episode_entries(folder: Path) -> list[str]:
    """The names in a sandbox's folder but the root-owned ones bubblewrap made in /tmp to show what the episode reads
    (the env's folder, when it lives under the host's /tmp)."""
    return sorted(entry.name for entry in os.scandir(folder)
                  if not (folder.name == "tmp" and entry.stat(follow_symlinks=False).st_uid == 0))


async def fresh_episodes(server: LocalServer, count: int) -> list[dict[str, Any]]:
    """`count` well-behaved episodes open at once: what each answered, and the files of its sandbox when it started,
    seen from the host."""
    async with openenv_gym.connect(server.url) as conn:
        sessions, found = [conn.session() for _ in range(count)], []
        for session in sessions:  # (one reset at a time: its uid is the one that appears with it)
            known = set(episodes(server))
            await session.reset(options={"index": 0})
            root = root_of(server, new_uid(server, known))
            found.append({"files": {folder: _episode_entries(root / folder)
                                    for folder in ("tmp", "tmp/work", "dev/shm")}})
        for session, fresh in zip(sessions, found, strict=True):
            fresh["answers"] = [(await asyncio.wait_for(session.step("echo fresh"), STEP_TIMEOUT))[0]]
            _, _, terminated, _, info = await asyncio.wait_for(session.step("exit"), STEP_TIMEOUT)
            fresh["ended"] = (terminated, info.get("error"))
            await session.close()
    return found


@pytest.fixture(scope="module")
def served():
    assert unavailable() is None, f"these tests need the sandbox, which make test sets up: {unavailable()}"
    markers = [Path(os.environ["OPENENV_GYM_HOME"]) / "abuse-marker.txt",
               Path(tempfile.gettempdir()) / f"openenv-gym-abuse-marker-{os.getpid()}.txt",
               Path.home() / f".openenv-gym-abuse-marker-{os.getpid()}"]
    for marker in markers:
        marker.write_text(HOST_MARKER)
    holder = Served(markers)
    try:
        yield holder
    finally:
        holder.stop()
        for marker in markers:
            marker.unlink(missing_ok=True)


async def sample(seconds: float, measure: Callable[[], Any]) -> list[Any]:
    """`measure()` every 50 ms for `seconds` (the bystander steps meanwhile)."""
    found, deadline = [], time.monotonic() + seconds
    while time.monotonic() < deadline:
        found.append(measure())
        await asyncio.sleep(0.05)
    return found


def python(code: str) -> str:
    """A shell command running `code` with the env's interpreter."""
    return f"{PYTHON} -c {shlex.quote(code)}"


# -- the attacks -------------------------------------------------------------------------------------------------

def test_a_fork_bomb_stops_at_its_process_bound(served):
    async def attack(a: Attacker) -> None:
        await a.run("bash -c ':(){ :|:& };:' >/dev/null 2>&1; echo bombed")
        a.seen["processes"] = await sample(1.5, lambda: len(a.pids()))  # the bomb goes on: counted from the host
        a.seen["limits"] = {hard_limit(pid, "Max processes") for pid in a.inside()} - {None}
    a = abuse(served, attack)
    assert max(a.seen["processes"]) <= LIMITS["processes"]  # all its processes, the agent's own included
    assert max(a.seen["processes"]) >= LIMITS["processes"] // 2  # (the bomb did go off)
    assert a.seen["limits"] <= {LIMITS["processes"]}


def test_kill_9_minus_1_ends_only_its_own_episode(served):
    host_process = subprocess.Popen(["sleep", "300"])
    try:
        async def attack(a: Attacker) -> None:
            server_pids = " ".join(map(str, [a.server.process.pid, *descendants(a.server.process.pid)]))
            await a.run(f"kill -9 {server_pids} {host_process.pid} 2>/dev/null; pkill -9 -f sleep; echo tried")
            await a.run("kill -9 -1; echo survived")  # (its own program dies of it: its episode ends)
        a = abuse(served, attack)
        assert host_process.poll() is None  # the host's processes live on (the server's: abuse() checked)
        assert a.ended is not None and a.ended["exit_code"] == -9
        assert "was killed by SIGKILL (exit code -9)" in a.ended["error"]["message"]
    finally:
        host_process.kill()
        host_process.wait()


def test_rm_rf_of_root_and_home_removes_only_its_own_files(served):
    async def attack(a: Attacker) -> None:
        home = os.environ["OPENENV_GYM_HOME"]
        a.seen["answers"] = [
            await a.run("rm -rf / ~ 2>/dev/null; echo $?"),
            await a.run("timeout 8 rm -rf --no-preserve-root / 2>/dev/null; echo $?"),
            await a.run(f"rm -rf /tmp/* /dev/shm/* {home} {shlex.quote(str(SHELL))} {sys.prefix} "
                        f"{tempfile.gettempdir()} {Path.home()} /etc /usr 2>/dev/null; echo $?"),
            await a.run("echo still here")]
    a = abuse(served, attack)  # (the host's files, the server's home, the env folder and the venv: checked there)
    assert a.seen["answers"][-1] == "exit 0\nstill here\n"  # it goes on, in its own emptied sandbox


def test_filling_the_disk_stops_at_its_bound(served):
    bound = LIMITS["disk_mb"] << 20

    async def attack(a: Attacker) -> None:
        for folder in (".", "/tmp", "/dev/shm"):  # (files of 8 MiB: under the file size bound, until the disk is full)
            await a.run(f"dd if=/dev/zero of={folder}/big bs=1M 2>&1 | tail -1; "
                        f"for i in $(seq 64); do dd if=/dev/zero of={folder}/big$i bs=1M count=8 2>/dev/null "
                        "|| break; done; echo $i")
        used = {}
        for folder in ("tmp/work", "tmp", "dev/shm"):
            fs = os.statvfs(a.root() / folder)
            used[folder] = ((fs.f_blocks - fs.f_bfree) * fs.f_frsize, fs.f_blocks * fs.f_frsize)
        a.seen["used"] = used
        a.seen["answer"] = await a.run("echo still here")
    a = abuse(served, attack)
    for folder, (used, size) in a.seen["used"].items():
        assert size <= bound, folder  # each of its file systems is bounded...
        assert used >= bound - (8 << 20), folder  # ...and was filled up to its bound
    assert a.seen["answer"] == "exit 0\nstill here\n"


def test_allocating_past_the_memory_bound_kills_only_its_own_processes(served):
    bound = LIMITS["memory_mb"] << 20
    grow = python('import time; b = b"x" * (300 << 20); time.sleep(2)')

    async def attack(a: Attacker) -> None:
        memory = next(group for group in a.groups if group.parts[4] in ("memory", "openenv-gym"))
        a.seen["one"] = await a.run(python("b = bytearray(1 << 30)"))  # one process past the bound: killed by it
        a.seen["many"] = await a.run(f"for i in 1 2 3; do {grow} & done; wait; echo done")  # together past it
        a.seen["oom_kills"] = oom_kills(memory)
        a.seen["peak"] = peak_memory(memory)
        # then the program itself: a process holds memory, and the program reads a command's output past the bound
        hold = python('import time; b = bytes(200 << 20) + b"x"; time.sleep(30)')
        await a.run(f"({hold} >/dev/null 2>&1 &); sleep 1; head -c 400M /dev/zero; echo done")
    a = abuse(served, attack)
    assert a.seen["one"] == "exit 137\nKilled\n" and a.seen["many"].startswith("exit 0\n")
    assert a.seen["oom_kills"] >= 2  # the bound killed the one and one of the three, seen from the host
    assert a.seen["peak"] <= bound  # and they never held more
    assert a.ended is not None and a.ended["exit_code"] == -9
    assert "memory bound" in a.ended["error"]["message"]


def oom_kills(group: Path) -> int:
    for name in ("memory.oom_control", "memory.events"):
        with contextlib.suppress(OSError):
            fields = dict(line.split() for line in (group / name).read_text().splitlines())
            return int(fields.get("oom_kill", 0))
    raise LookupError(f"no OOM counter in {group}")


def peak_memory(group: Path) -> int:
    for name in ("memory.max_usage_in_bytes", "memory.peak"):
        with contextlib.suppress(OSError):
            return int((group / name).read_text())
    raise LookupError(f"no peak memory in {group}")


def test_a_million_open_files_stop_at_the_open_files_bound(served):
    hoard = python("import os, resource, time\n"
                   "try:\n    resource.setrlimit(resource.RLIMIT_NOFILE, (10**6, 10**6))\n"
                   "except (OSError, ValueError):\n    pass\n"
                   "fds = []\n"
                   "try:\n    while len(fds) < 10**6:\n        fds.append(os.open('/dev/null', os.O_RDONLY))\n"
                   "except OSError:\n    pass\n"
                   "for _ in range(40):\n    if os.fork() == 0:\n        break\n"  # children that hold them all too
                   "time.sleep(30)\n")

    async def attack(a: Attacker) -> None:
        await a.run(f"({hoard} >/dev/null 2>&1 &); echo started")
        deadline = time.monotonic() + 20
        while sum(open_fds(pid) >= OPEN_FILES - 10 for pid in a.pids()) < 41 and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        a.seen["fds"] = [(open_fds(pid), hard_limit(pid, "Max open files")) for pid in a.inside()]
    a = abuse(served, attack)
    fds = a.seen["fds"]
    assert sum(count >= OPEN_FILES - 10 for count, _ in fds) >= 41  # (the hoarders are at it)
    assert all(count <= limit <= OPEN_FILES for count, limit in fds)  # each process stops at the bound


def test_a_million_files_are_wiped_with_their_sandbox(served):
    create = python("import time\nend, n = time.monotonic() + 3, 0\nwhile time.monotonic() < end:\n"
                    "    for _ in range(100):\n        open(f'f{n}', 'w').close()\n        n += 1\nprint(n)\n")

    async def attack(a: Attacker) -> None:
        a.seen["answer"] = await a.run(create)
        with os.scandir(a.root() / "tmp/work") as entries:
            a.seen["files"] = sum(1 for _ in entries)  # counted from the host
    a = abuse(served, attack)  # (the fresh episode after: no file of these in its sandbox)
    assert a.seen["answer"].startswith("exit 0\n")
    assert a.seen["files"] > 1000


def test_no_port_of_the_host_nor_any_outside_address_is_reached(served):
    listener = Listener(everywhere=True)
    targets = [("127.0.0.1", listener.port), ("::1", listener.port), ("192.0.2.1", 80), ("1.1.1.1", 443),
               ("8.8.8.8", 53), ("pypi.org", 443)] + [(address, listener.port) for address in outside_addresses()]
    scan = python("import socket\nopen_ports = []\nfor port in range(1, 65536):\n"
                  "    with socket.socket() as s:\n        s.settimeout(0.05)\n"
                  "        if s.connect_ex(('127.0.0.1', port)) == 0:\n            open_ports.append(port)\n"
                  "print('scanned', port, 'open', open_ports)\n")
    reach = python("import socket, sys\nfor host, port in eval(sys.argv[1]):\n    try:\n"
                   "        socket.create_connection((host, port), 2).close()\n        print('reached', host, port)\n"
                   "    except OSError as exc:\n        print('refused', host, port, exc)\n")

    async def attack(a: Attacker) -> None:
        a.seen["scan"] = await a.run(scan)
        a.seen["reach"] = await a.run(f"{reach} {shlex.quote(repr(targets))}")
        pid = min(episodes(a.server)[a.uid])
        a.seen["interfaces"] = [line.split(":")[0].strip()
                                for line in Path(f"/proc/{pid}/net/dev").read_text().splitlines()[2:]]
        a.seen["routes"] = Path(f"/proc/{pid}/net/route").read_text().splitlines()[1:]
        await asyncio.sleep(0.3)
        a.seen["accepted"] = listener.accepted
    try:
        a = abuse(served, attack)
    finally:
        listener.close()
    assert "scanned 65535" in a.seen["scan"]  # (they ran, to their end)
    assert sum(line.startswith("refused ") for line in a.seen["reach"].splitlines()) == len(targets)
    assert a.seen["accepted"] == 0  # the host's listener heard from nobody
    assert a.seen["interfaces"] == ["lo"] and a.seen["routes"] == []  # its network: loopback alone, no way out


def test_no_other_sessions_files_nor_proc_1s_environment_are_read(served):
    markers = " ".join(map(str, served.markers))

    async def attack(a: Attacker) -> None:
        bystander_pid = min(episodes(a.server)[a.bystander.uid])  # its host pid (a policy could guess it)
        a.seen["answers"] = [await a.run(command) for command in (
            "cat /proc/1/environ; tr '\\0' '\\n' < /proc/1/environ",
            "cat /tmp/work/note.txt /proc/*/cwd/note.txt /proc/*/root/tmp/work/note.txt; ls -a /tmp /tmp/work",
            f"cat /proc/{bystander_pid}/root/tmp/work/note.txt /proc/{bystander_pid}/environ; "
            f"ls /proc/{bystander_pid}/root/tmp/work",
            f"cat {markers}",
            f"timeout 5 grep -rs {MARKER} /tmp /dev/shm /run /var/tmp /root /home /mnt /media; echo searched")]
    a = abuse(served, attack)
    read = "".join(a.seen["answers"])
    assert MARKER not in read and HOST_MARKER not in read and SECRET not in read and URL_SECRET not in read
    assert a.seen["answers"][-1].endswith("searched\n")


def test_the_programs_environment_carries_none_of_the_servers_secrets(served):
    """The server runs with credentials in its environment, as a user's shell has them: a cloud's secret key, and a
    private package index's URL with its password in it. The episode's program must be handed neither."""
    async def attack(a: Attacker) -> None:
        a.seen["answers"] = [await a.run("env; tr '\\0' '\\n' < /proc/self/environ")]
    a = abuse(served, attack)
    read = "".join(a.seen["answers"])
    assert SECRET not in read, "AWS_SECRET_ACCESS_KEY reached the program"
    assert URL_SECRET not in read, "PIP_INDEX_URL (a password in its URL) reached the program"


def test_a_program_that_ignores_sigterm_is_gone_when_its_episode_closes(served):
    ignoring = python("import os, signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                      "signal.signal(signal.SIGHUP, signal.SIG_IGN)\nos.setsid()\n"
                      "if os.fork() == 0:\n    time.sleep(600)\n")  # (a grandchild, orphaned, in a session of its own)

    async def attack(a: Attacker) -> None:
        await a.run("(trap '' TERM HUP; exec sleep 600) >/dev/null 2>&1 & "
                    "setsid sh -c \"trap '' TERM HUP INT; sleep 700\" >/dev/null 2>&1 & "
                    f"{ignoring} >/dev/null 2>&1; echo started")
        step = asyncio.ensure_future(a.session.step("trap '' TERM HUP; sleep 600; echo never"))  # still running...
        deadline = time.monotonic() + 10
        while sum(map(ignores_sigterm, a.pids())) < 4 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        a.seen["ignoring"] = sum(map(ignores_sigterm, a.pids()))
        await a.session.close()  # ...when its episode is closed
        with contextlib.suppress(Exception):
            await asyncio.wait_for(step, STEP_TIMEOUT)
    a = abuse(served, attack)  # (after which none of its processes is left anywhere: checked there)
    assert a.seen["ignoring"] >= 4

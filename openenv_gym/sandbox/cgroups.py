"""An episode's control group: one bound on how many processes its programs run at once and on the memory they
hold together, whatever they fork (a per-process rlimit would let a fork bomb multiply it), and where asked, on the
CPU time they take (a Harbor task's `cpus`). cgroup v2 where the machine delegates its controllers, the v1 `pids`
and `memory` (and `cpu`) hierarchies otherwise; none where neither is writable (then the rlimits of each process
are the bounds, and no CPU bound holds).

Where: in the hierarchy's root, for a root server; else in the server's own group, where the system delegates it
to the server's user (cgroup v2: a systemd scope or service with Delegate=yes, `systemd-run --user --scope -p
Delegate=yes openenv-gym serve ...`; v1: a group an administrator made and gave the user). In a v2 group, only
leaves hold processes: the server's own move into a leaf (`server`) first."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from openenv_gym.runtime.lifetime import process_runs
from openenv_gym.sandbox.pidns import kill_until_gone

ROOT = Path("/sys/fs/cgroup")
GROUP = "openenv-gym"  # the folder every episode's group is made in
REMOVE_WAIT = 2.0  # seconds a group may take to empty once its processes were killed


@dataclass(frozen=True)
class Cgroup:
    """The folders of one episode's group (one per hierarchy), and the files its processes join it by."""

    folders: tuple[str, ...]

    @property
    def procs(self) -> tuple[str, ...]:
        return tuple(f"{folder}/cgroup.procs" for folder in self.folders)

    def join(self) -> None:
        """Put the calling process in the group (its children are born in it)."""
        for procs in self.procs:
            with open(procs, "w") as file:
                file.write(str(os.getpid()))

    def oom_kills(self) -> int:
        """How many of its processes the memory bound killed, since the group was made."""
        for folder in self.folders:
            for name in ("memory.events", "memory.oom_control"):
                with contextlib.suppress(OSError):
                    fields = dict(line.split() for line in Path(folder, name).read_text().splitlines())
                    return int(fields.get("oom_kill", 0))
        return 0

    def pids(self) -> list[int]:
        with open(self.procs[0]) as file:
            return [int(line) for line in file]

    async def kill_all(self, within: float = REMOVE_WAIT) -> bool:
        """Kill every process in the group (a fork bomb's too: its bound stops it growing while it is killed);
        whether the group was empty within `within` seconds."""
        return await kill_until_gone(self.pids, lambda pid: os.kill(pid, signal.SIGKILL), within)

    async def remove(self) -> None:
        """Remove its folders once its processes are gone (they were killed: they may take a moment to be reaped).
        One still busy past REMOVE_WAIT is left to remove_orphans, once its worker has ended."""
        deadline = time.monotonic() + REMOVE_WAIT
        for folder in self.folders:
            while not _removed(folder) and time.monotonic() < deadline:
                await asyncio.sleep(0.01)


def _removed(folder: str) -> bool:
    try:
        os.rmdir(folder)
    except FileNotFoundError:
        pass
    except OSError:  # busy: a process of it still exits
        return False
    return True


def remove_orphans() -> None:
    """Remove the groups of worker processes that are gone (killed before they removed their episodes' groups)."""
    for folder in _groups():
        pid = folder.name.split("-")[0]
        if pid.isdigit() and not process_runs(int(pid)):
            _removed(str(folder))


def remove_own() -> None:
    """Remove this process's episode groups that are empty (a sandbox whose group outlived its close by more than
    REMOVE_WAIT, under load): at a worker's end, so that it leaves none."""
    for folder in _groups():
        if folder.name.split("-")[0] == str(os.getpid()):
            _removed(str(folder))


def _groups() -> list[Path]:
    return [folder for base in [*writable_hierarchies(), *filter(None, [_v1_cpu()])]
            for folder in (base / GROUP).glob("*-*")]


def _controllers(folder: Path) -> set[str]:
    with contextlib.suppress(OSError):
        return set((folder / "cgroup.controllers").read_text().split())
    return set()


def _own_groups() -> dict[str, str]:
    """This process's group in each hierarchy ("" for v2's, else the v1 controllers' names), from /proc/self/cgroup."""
    with contextlib.suppress(OSError):
        lines = Path("/proc/self/cgroup").read_text().splitlines()
        return {controllers: path for _, controllers, path in (line.split(":", 2) for line in lines)}
    return {}


def _writable(folder: Path) -> bool:
    return os.access(folder, os.W_OK) and os.access(folder / "cgroup.procs", os.W_OK)


def writable_hierarchies() -> list[Path]:
    """Where this process may make episode groups: [a v2 group] or [a v1 pids group, a v1 memory group] (the
    hierarchies' roots, or the server's own groups where they are delegated to it); [] if nowhere."""
    own = _own_groups()
    if {"pids", "memory"} <= _controllers(ROOT):  # cgroup v2 (alone: the v1 controllers are not mounted)
        for folder in (ROOT, ROOT / own.get("", "/").lstrip("/")):
            if {"pids", "memory"} <= _controllers(folder) and _writable(folder):
                return [folder]
        return []
    for v1 in ([ROOT / "pids", ROOT / "memory"],
               [ROOT / name / own.get(name, "/").lstrip("/") for name in ("pids", "memory")]):
        if all(_writable(folder) for folder in v1):
            return v1
    return []


def _enable_v2(parent: Path) -> None:
    """Let the groups made in v2 group `parent` use the pids and memory controllers. A delegated group holding
    processes (the server's) cannot: they move into a leaf of it first."""
    wanted = {"pids", "memory"} | ({"cpu"} & _controllers(parent))
    if wanted <= set((parent / "cgroup.subtree_control").read_text().split()):
        return
    if parent != ROOT and (pids := (parent / "cgroup.procs").read_text().split()):
        leaf = parent / "server"
        leaf.mkdir(exist_ok=True)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):  # (one that ended meanwhile)
                (leaf / "cgroup.procs").write_text(pid)
    (parent / "cgroup.subtree_control").write_text(" ".join(f"+{name}" for name in sorted(wanted)))


def _v1_cpu() -> Path | None:
    """Where this process may make groups in v1's cpu hierarchy (its root, or the server's own group there)."""
    own = _own_groups()
    key = next((key for key in own if "cpu" in key.split(",")), None)
    folder = ROOT / "cpu" / own.get(key, "/").lstrip("/") if key is not None else None
    return folder if folder is not None and _writable(folder) else None


CPU_PERIOD = 100_000  # microseconds: a bound of N cpus is N times this much CPU time in each period


def create(name: str, processes: int, memory_bytes: int, cpus: float | None = None) -> Cgroup | None:
    """The group of an episode named `name`, bounded (its CPU time to `cpus` cores' worth, where given and the
    machine has the cpu controller here); None where this machine lets us make none."""
    folders = []
    bases = writable_hierarchies()
    if cpus is not None and len(bases) == 2 and (cpu := _v1_cpu()) is not None:
        bases.append(cpu)
    for base in bases:
        parent = base / GROUP
        if not parent.is_dir():
            with contextlib.suppress(FileExistsError):
                parent.mkdir()
            if (base / "cgroup.subtree_control").exists():  # v2: the children of our group may use the controllers
                with contextlib.suppress(OSError):
                    _enable_v2(base)
                    _enable_v2(parent)
        folder = parent / name
        folder.mkdir()
        folders.append(str(folder))
        limits: dict[str, int | str] = {"pids.max": processes, "memory.max": memory_bytes,
                                        "memory.limit_in_bytes": memory_bytes, "memory.swap.max": 0}
        if cpus is not None:
            quota = max(int(cpus * CPU_PERIOD), 1000)
            limits |= {"cpu.max": f"{quota} {CPU_PERIOD}", "cpu.cfs_period_us": CPU_PERIOD, "cpu.cfs_quota_us": quota}
        for file, value in limits.items():
            if (folder / file).exists():
                (folder / file).write_text(str(value))
    return Cgroup(tuple(folders)) if folders else None

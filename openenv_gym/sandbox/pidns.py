"""The processes of a sandbox that has no control group to find them by: those in its PID namespace, found in the
host's /proc, and killed (but for the ones that hold the sandbox open)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time


def members(namespace: str) -> list[int]:
    """The host's pids of the processes in PID namespace `namespace` (as /proc/PID/ns/pid reads: "pid:[N]")."""
    found = []
    with os.scandir("/proc") as entries:
        for entry in entries:
            if entry.name.isdigit():
                with contextlib.suppress(OSError):  # (one that ended meanwhile)
                    if os.readlink(f"/proc/{entry.name}/ns/pid") == namespace:
                        found.append(int(entry.name))
    return found


async def kill_all(member: int, keep: set[int], within: float) -> bool:
    """Kill every process of the PID namespace of process `member` but those of `keep` (the sandbox's init and its
    holder); whether none was left within `within` seconds."""
    namespace = os.readlink(f"/proc/{member}/ns/pid")
    deadline = time.monotonic() + within
    while doomed := [pid for pid in members(namespace) if pid not in keep]:
        for pid in doomed:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.001)
    return True


def children(pid: int) -> list[int]:
    """The children of process `pid`."""
    found = []
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as file:
                found += [int(child) for child in file.read().split()]
    return found

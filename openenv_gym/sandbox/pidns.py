"""The processes of a sandbox that has no control group to find them by: those its own /proc lists (its PID
namespace's), reached from the server through its root, and killed through their /proc folders (pidfd_send_signal
takes one), but for the two that hold it open: bubblewrap's init (1) and the holder (2)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time

HOLDERS = ("1", "2")  # in the sandbox's PID namespace


def members(procfs: str) -> list[str]:
    """The pids (in the sandbox's PID namespace) of its episode's processes, from its /proc (`procfs`: as the
    server reaches it)."""
    return [name for name in os.listdir(procfs) if name.isdigit() and name not in HOLDERS]


async def kill_all(procfs: str, within: float) -> bool:
    """Kill every process of the episode of the sandbox whose /proc is `procfs`; whether none was left within
    `within` seconds."""
    deadline = time.monotonic() + within
    while doomed := members(procfs):
        for pid in doomed:
            with contextlib.suppress(OSError):  # (one that ended meanwhile)
                process = os.open(f"{procfs}/{pid}", os.O_RDONLY | os.O_DIRECTORY)
                try:
                    signal.pidfd_send_signal(process, signal.SIGKILL)
                finally:
                    os.close(process)
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.001)
    return True

"""The processes of a sandbox that has no control group to find them by: those its own /proc lists (its PID
namespace's), reached from the server through its root, and killed through their /proc folders (pidfd_send_signal
takes one), but for the two that hold it open: bubblewrap's init (1) and the holder (2)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
HOLDERS = ("1", "2")  # in the sandbox's PID namespace


def members(procfs: str) -> list[str]:
    """The pids (in the sandbox's PID namespace) of its episode's processes, from its /proc (`procfs`: as the
    server reaches it)."""
    return [name for name in os.listdir(procfs) if name.isdigit() and name not in HOLDERS]


async def kill_all(procfs: str, within: float) -> bool:
    """Kill every process of the episode of the sandbox whose /proc is `procfs`; whether none was left within
    `within` seconds."""
    def kill(pid: str) -> None:
        process = os.open(f"{procfs}/{pid}", os.O_RDONLY | os.O_DIRECTORY)
        try:
            signal.pidfd_send_signal(process, signal.SIGKILL)
        finally:
            os.close(process)
    return await kill_until_gone(lambda: members(procfs), kill, within)


async def kill_until_gone(listed: Callable[[], list[T]], kill: Callable[[T], None], within: float) -> bool:
    """Kill each process `listed()` names, again and again until it names none (what they fork meanwhile too);
    whether that took at most `within` seconds."""
    deadline = time.monotonic() + within
    while doomed := listed():
        for pid in doomed:
            with contextlib.suppress(OSError):  # (one that ended meanwhile)
                kill(pid)
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.001)
    return True

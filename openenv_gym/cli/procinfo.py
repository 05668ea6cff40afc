"""Resident memory of a process and all its descendants (Linux /proc). It imports nothing of openenv_gym, so a
benchmark peer running in another virtual environment can load it by path."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


def _children_by_parent() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry.name))  # the parent pid follows "pid (comm) S"
    return children


def tree(pid: int) -> list[int]:
    """`pid` and its descendants (a server, the server it runs in a venv, their workers)."""
    children = _children_by_parent()
    members, pending = [], [pid]
    while pending:
        member = pending.pop()
        pending += children.get(member, [])
        members.append(member)
    return members


def tree_rss(pid: int) -> int:
    """Resident bytes of `pid` and its descendants."""
    total = 0
    for member in tree(pid):
        with contextlib.suppress(OSError):  # a process may end while we read
            total += int(Path(f"/proc/{member}/statm").read_text().split()[1]) * PAGE_SIZE
    return total


def tree_threads(pid: int) -> int:
    """OS threads of `pid` and its descendants."""
    total = 0
    for member in tree(pid):
        with contextlib.suppress(OSError, StopIteration):
            status = Path(f"/proc/{member}/status").read_text().splitlines()
            total += int(next(line for line in status if line.startswith("Threads:")).split()[1])
    return total

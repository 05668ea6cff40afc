"""Resident memory of a process and its children (Linux /proc). Standalone: the OpenEnv peer imports it too."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


def children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:  # the parent pid, the 4th field of stat, after "pid (comm)"
            found.append(int(entry.name))
    return found


def tree_rss(pid: int) -> int:
    """Resident bytes of `pid` and its direct children (a server and its workers)."""
    total = 0
    for member in [pid, *children(pid)]:
        with contextlib.suppress(OSError):  # a process may end while we read
            total += int(Path(f"/proc/{member}/statm").read_text().split()[1]) * PAGE_SIZE
    return total

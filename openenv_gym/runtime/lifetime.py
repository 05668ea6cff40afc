"""A child process that must not outlive its parent asks Linux for a signal when the parent dies; whether a process
(a worker that left something behind: an episode's group, folder or container) still runs."""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import signal

PR_SET_PDEATHSIG = 1  # prctl(2)
FORK_SERVER = "OPENENV_GYM_FORK_SERVER"  # in the environment of the programs' fork server (programs/program.py)


@functools.cache
def libc() -> ctypes.CDLL:
    """The C library: by glibc's soname, loaded already; found otherwise (finding it runs ldconfig: milliseconds)."""
    try:
        return ctypes.CDLL("libc.so.6", use_errno=True)
    except OSError:
        return ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)


def die_with_parent(sig: int = signal.SIGTERM) -> None:
    """Get `sig` when the parent process dies (killed outright, say); no-op where prctl is not there."""
    with contextlib.suppress(OSError, AttributeError):
        libc().prctl(PR_SET_PDEATHSIG, sig)


def process_runs(pid: int) -> bool:
    """Whether process `pid` runs: a zombie (killed, not yet reaped by its parent) does not."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False

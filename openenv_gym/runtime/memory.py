"""Giving freed memory back to the operating system.

After a burst (a client that sent 10 MB frames, thousands of sessions that ended), CPython frees the objects,
but glibc's allocator keeps much of the freed heap for reuse, so the process's RSS stays high long after. A
worker calls `release_free_memory()` from its housekeeping: glibc's `malloc_trim(0)` returns the free pages
at the top of every heap. Elsewhere (musl, macOS) it does nothing.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from openenv_gym.runtime.lifetime import libc


def _malloc_trim() -> Callable[[int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return libc().malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None


_TRIM = _malloc_trim()


def release_free_memory() -> None:
    if _TRIM is not None:
        _TRIM(0)

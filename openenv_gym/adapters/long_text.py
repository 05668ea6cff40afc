"""Reading a long text action in a thread, so that no other session of the worker waits for it.

Finding the tool calls in model text is linear (episode/toolcalls.py), but at the largest action a server
takes (`--max-action-chars`, 256 Ki characters by default) it still costs milliseconds to tens of them, and
an event loop does nothing else meanwhile. Text up to LONG_TEXT characters, the usual case, is read inline.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

LONG_TEXT = 8192  # characters read inline (well under a millisecond); longer text is read in a thread


def is_long_text(action: Any) -> bool:
    """Whether `action` is text too long to read inline."""
    return type(action) is str and len(action) > LONG_TEXT


async def read_action(read: Callable[..., T], action: Any, *args: Any) -> T:
    """`read(action, *args)`: inline, or in the worker's threads when `action` is long text."""
    if is_long_text(action):
        return await asyncio.to_thread(read, action, *args)
    return read(action, *args)

"""Event loops: uvloop when it is installed (it is on Linux and macOS by default), asyncio's otherwise."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any


def new_event_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def run(main: Coroutine[Any, Any, Any]) -> Any:
    """Run a coroutine to completion on a new loop, as asyncio.run does."""
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        return runner.run(main)

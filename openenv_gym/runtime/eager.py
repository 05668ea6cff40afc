"""Run a coroutine inline until it first waits, and only then hand it to a Task.

Most steps of cheap environments never wait on anything: creating a Task for each of them (and
a loop iteration to run it) would cost more than the step. Python 3.12's eager task factory does
the same thing; this project targets 3.11.
"""

from __future__ import annotations

import asyncio
import types
from collections.abc import Coroutine
from typing import Any


@types.coroutine
def _continue(coro: Coroutine, yielded: Any):
    """Keep driving a coroutine that already ran up to its first suspension (`yielded`)."""
    while True:
        try:
            sent = yield yielded
        except BaseException as exc:  # cancellation and errors go into the coroutine
            try:
                yielded = coro.throw(exc)
            except StopIteration as stop:
                return stop.value
        else:
            try:
                yielded = coro.send(sent)
            except StopIteration as stop:
                return stop.value


async def _resume(coro: Coroutine, yielded: Any) -> Any:
    return await _continue(coro, yielded)


def continue_in_task(coro: Coroutine, yielded: Any) -> asyncio.Task:
    """A task that finishes a coroutine which already ran up to its first wait (`yielded`)."""
    return asyncio.get_running_loop().create_task(_resume(coro, yielded))


def start_eagerly(coro: Coroutine) -> tuple[bool, Any]:
    """Return (True, result) if the coroutine finished without waiting, else (False, task).

    Exceptions the coroutine raises before its first wait propagate to the caller.
    """
    try:
        yielded = coro.send(None)
    except StopIteration as stop:
        return True, stop.value
    return False, continue_in_task(coro, yielded)

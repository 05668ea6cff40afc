"""Run a coroutine at once, until it first waits, and only then as a task of its own.

Most steps of cheap environments never wait on anything: a Task for each (and a loop iteration to run it) would
cost more than the step. Python 3.12's eager tasks do this; this project targets 3.11, so `EagerStarter` does it
the same way: the coroutine's first part already runs as the task that goes on with it should it wait
(`asyncio.current_task()` is that task) and in a context of its own (a copy of the caller's, as a new task gets).
What code opens before its first wait and closes after it (asyncio.timeout, TaskGroup, the anyio cancel scopes that
every httpx request opens, a tracing span's context variable) belongs to one task, and a timeout or a cancellation
reaches the coroutine where it waits, never the caller (inside a server's connection task, it cut the connection).

That task is a spare, made ahead: a coroutine that finishes without waiting leaves it for the next one, one that
waits is handed over to it (a new spare is made then). A spare's body (`_HandOver`) parks on a future until it is
handed a coroutine, and from then on drives that coroutine: whatever reaches the task (its first step, a wake-up, a
cancellation, even one that came before the task first ran) reaches the coroutine as if it had been its own task.
"""

from __future__ import annotations

import asyncio
import contextvars

# each loop's running task, as 3.12's eager tasks set it: 3.11 has no public way to run code as a given task
from asyncio.tasks import _current_tasks, _enter_task, _leave_task
from collections.abc import Coroutine
from typing import Any


class _HandOver(Coroutine):
    """The coroutine of a spare task: parked on `gate` until `take` hands it a coroutine that ran up to its first
    wait, then that coroutine, driven in the context it started in."""

    __slots__ = ("context", "coro", "gate", "yielded")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.gate = loop.create_future()
        self.coro: Coroutine | None = None
        self.context: contextvars.Context | None = None
        self.yielded: Any = None  # what the coroutine waits on, until the task takes it over

    def take(self, coro: Coroutine, yielded: Any, context: contextvars.Context) -> None:
        self.coro, self.yielded, self.context = coro, yielded, context
        if not self.gate.done():  # (cancelled with the task by the coroutine's own first part: the wake-up comes)
            self.gate.set_result(None)

    def send(self, value: Any) -> Any:
        coro = self.coro
        if coro is None:  # nothing handed over yet: park
            self.gate._asyncio_future_blocking = True  # as Future.__await__ marks what it yields to its task
            return self.gate
        yielded = self.yielded
        if yielded is not None:  # the first time the task runs after the hand-over: wait where the coroutine waits
            self.yielded = None
            return yielded
        return self.context.run(coro.send, value)  # type: ignore[union-attr]

    def throw(self, typ: Any, val: Any = None, tb: Any = None) -> Any:
        """A cancellation (all a task throws in): into the coroutine where it waits, as for a task of its own."""
        exc = typ if val is None else val
        coro = self.coro
        if coro is None:  # let go while parked (close): nothing was handed over
            raise exc
        waiting, self.yielded = self.yielded, None
        if waiting is not None:  # cancelled before the task took over: what it waits on is cancelled, as a task's is
            waiting.cancel()
        return self.context.run(coro.throw, exc)  # type: ignore[union-attr]

    def __await__(self) -> Any:  # (a task drives it with send and throw; nothing awaits it)
        raise TypeError("a spare's body is driven by its task, not awaited")


class EagerStarter:
    """Starts coroutines eagerly on one event loop (see the module's docstring). Made on the running loop; whoever
    makes one closes it."""

    __slots__ = ("_body", "_loop", "_task")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._task: asyncio.Task | None = None  # the spare (None once closed), and its body
        self._body: _HandOver | None = None
        self._renew()

    def _renew(self) -> None:
        self._body = _HandOver(self._loop)
        self._task = self._loop.create_task(self._body)

    def start(self, coro: Coroutine) -> tuple[bool, Any]:
        """Return (True, result) if the coroutine finished without waiting, else (False, the task that goes on
        with it). Exceptions the coroutine raises before its first wait propagate to the caller."""
        loop, task, body = self._loop, self._task, self._body
        caller = _current_tasks.get(loop)
        if task is None or task is caller:  # closed, or started inside the first part of the spare's coroutine
            body = _HandOver(loop)
            task = loop.create_task(body)  # a spare for this start only
        context = contextvars.copy_context()
        if caller is not None:
            _leave_task(loop, caller)
        _enter_task(loop, task)
        try:
            yielded = context.run(coro.send, None)
        except StopIteration as stop:
            self._unused(task)
            return True, stop.value
        except BaseException:
            self._unused(task)
            raise
        finally:
            _leave_task(loop, task)
            if caller is not None:
                _enter_task(loop, caller)
        body.take(coro, yielded, context)  # type: ignore[union-attr]
        if task is self._task:  # handed over: the next coroutine gets a new spare
            self._renew()
        return False, task

    def _unused(self, task: asyncio.Task) -> None:
        """A first part ended without waiting: the spare it ran as is not needed by it."""
        if task is not self._task:  # made for this start only
            task.cancel()
        elif task.cancelling():  # the first part cancelled its own task: the spare is spent
            self._renew()

    def close(self) -> None:
        """Let the parked spare go (a task left pending would be reported when its loop closes). Coroutines started
        later still run at once, each with a spare of its own."""
        task, self._task, self._body = self._task, None, None
        if task is not None:
            task.cancel()

"""A thread pool that hung calls cannot use up.

Blocking environment code runs in threads, and a thread cannot be stopped: a step that hangs keeps its
thread after its session has been given up. With a fixed pool, a few such steps would leave no thread for
anyone, and every other session would time out behind them. Here a call that is cancelled while it runs
(asyncio cancels it when the awaiting task is cancelled: a step timeout, a closed session) is *abandoned*:
a new thread takes its place, and the abandoned one ends once its call returns. So a hung step costs its
own session and one parked thread, nothing else. Threads are daemons, so a hung one never keeps the
process from exiting.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

log = logging.getLogger(__name__)

MAX_ABANDONED = 1024  # threads parked in hung calls, at most; past it, hung calls do keep pool threads


class _Call(Future):
    """A pool call; cancelling it while it runs abandons its thread (see the module docstring)."""

    def __init__(self, pool: ElasticPool) -> None:
        super().__init__()
        self.pool = pool
        self.abandoned = False

    def cancel(self) -> bool:
        if super().cancel():  # not started yet: it never takes a thread
            return True
        if self.running():
            self.pool._abandon(self)
        return False


class ElasticPool(ThreadPoolExecutor):
    """A ThreadPoolExecutor in type only (asyncio takes nothing else as a loop's default executor): its own
    threads, queue and shutdown."""

    def __init__(self, threads: int, name: str, max_abandoned: int = MAX_ABANDONED) -> None:
        super().__init__(threads, name)  # its state stays unused: submit and shutdown are this class's own
        self.threads = threads
        self.name = name
        self.max_abandoned = max_abandoned
        self._queue: queue.SimpleQueue[tuple[_Call, Callable, tuple, dict] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = threading.Semaphore(0)  # released by each thread that waits for work
        self._started = 0  # threads alive
        self._abandoned = 0  # of which parked in abandoned calls
        self._shutdown = False

    @property
    def abandoned(self) -> int:
        return self._abandoned

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        call = _Call(self)
        with self._lock:
            if self._shutdown:
                raise RuntimeError("cannot run new calls after the pool was shut down")
            self._queue.put((call, fn, args, kwargs))
            if not self._idle.acquire(blocking=False):
                self._start_thread()
        return call

    def _start_thread(self) -> None:
        """Start a thread if the pool holds fewer than its size plus the abandoned ones (lock held)."""
        if self._started < self.threads + self._abandoned:
            self._started += 1
            threading.Thread(target=self._work, name=f"{self.name}_{self._started}", daemon=True).start()

    def _abandon(self, call: _Call) -> None:
        with self._lock:
            if call.abandoned or call.done() or self._abandoned >= self.max_abandoned:
                return
            call.abandoned = True
            self._abandoned += 1
            log.warning("a call in thread pool %s was given up while running; %d threads are parked in such "
                        "calls", self.name, self._abandoned)
            self._start_thread()

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            call, fn, args, kwargs = item
            if call.set_running_or_notify_cancel():
                try:
                    result = fn(*args, **kwargs)
                except BaseException as exc:
                    call.set_exception(exc)
                else:
                    call.set_result(result)
                del item, fn, args, kwargs  # hold nothing of the call while waiting for the next
            with self._lock:
                if call.abandoned:
                    self._abandoned -= 1
                    if self._started > self.threads + self._abandoned:  # its replacement serves on
                        self._started -= 1
                        return
            self._idle.release()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            self._shutdown = True
            if cancel_futures:
                while True:
                    try:
                        item = self._queue.get_nowait()
                    except queue.Empty:
                        break
                    if item is not None:
                        item[0].cancel()
            for _ in range(self._started):
                self._queue.put(None)
        # Threads are daemons: `wait` is not honoured, a hung call must never hold up the process's exit.

"""Call the async client from synchronous code (the Gymnasium facade).

Outside an event loop, each thread gets a private event loop that runs only during a call:
no thread hop, the lowest latency. Inside a running loop (Jupyter, an async trainer), calls go to
one background loop thread instead, since a loop cannot be run from inside another.
Connections are bound to the loop that made them, so each runner keeps its own transports, shared by
every env of that runner (a native transport multiplexes them all over one connection).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from openenv_gym.client.transport import Transport
from openenv_gym.client.vector import AsyncVectorClient
from openenv_gym.runtime.loops import new_event_loop, new_private_loop

T = TypeVar("T")


class Runner:
    """Runs coroutines on one event loop and keeps that loop's shared transports."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._transports: dict[tuple, Transport] = {}
        self._clients: list[AsyncVectorClient] = []  # opened on this loop by open_client: closed with it

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        raise NotImplementedError

    def open_client(self, opening: Coroutine[Any, Any, AsyncVectorClient]) -> AsyncVectorClient:
        """run(opening), keeping the vector client it opens: one its owner never closed (a rollout function
        dropped without a word) is closed with this loop at exit, and its sessions end then, not after the
        server's resume window."""
        client = self.run(opening)
        self._clients = [kept for kept in self._clients if kept.transports] + [client]
        return client

    def usable(self) -> bool:
        """Whether `run` works from here now."""
        return True

    async def open_transport(self, cls: type[Transport], url: str, options: dict[str, Any]) -> Transport:
        """The shared, open transport of this runner to `url` (opened, or reopened, on demand), from its loop."""
        key = (cls, url, json.dumps(options, sort_keys=True, default=str))
        transport = self._transports.get(key)
        if transport is None or transport.closed:
            transport = await cls(url, **options).open()
            self._transports[key] = transport
        return transport

    async def _close_connections(self) -> None:
        """Close the vector clients opened through this runner, then its shared transports."""
        clients, self._clients = self._clients, []
        await asyncio.gather(*(client.close() for client in clients), return_exceptions=True)
        transports, self._transports = list(self._transports.values()), {}
        for transport in transports:
            with contextlib.suppress(Exception):
                await transport.close()


class PrivateLoopRunner(Runner):
    """A loop made for one thread, run only while a call is in progress. An env made on one thread may be called
    from others (TRL's asynchronous trainer resets and steps its envs in a pool of threads): their calls on this
    loop take turns."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(loop)
        self._turn = threading.Lock()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        with self._turn:
            return self.loop.run_until_complete(coro)

    def usable(self) -> bool:
        """Not from inside a running loop (one loop cannot run inside another), nor once closed."""
        return not self.loop.is_closed() and asyncio._get_running_loop() is None

    def shutdown(self) -> None:
        if not self.loop.is_closed():
            self.run(self._close_connections())
            # what is left (connections of envs nobody closed) is cancelled, as asyncio.run does
            leftover = asyncio.all_tasks(self.loop)
            for task in leftover:
                task.cancel()
            self.loop.run_until_complete(asyncio.gather(*leftover, return_exceptions=True))
            self.loop.close()


class BackgroundLoopRunner(Runner):
    """A loop running forever in a daemon thread; callers block on the result."""

    def __init__(self) -> None:
        super().__init__(new_event_loop())
        self._thread = threading.Thread(target=self.loop.run_forever, name="openenv-gym-loop", daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def shutdown(self) -> None:
        if self.loop.is_running():
            with contextlib.suppress(Exception):
                self.run(self._close_connections())
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout=5)


_local = threading.local()
_background: BackgroundLoopRunner | None = None
_all_private: list[PrivateLoopRunner] = []
_lock = threading.Lock()


def current_runner() -> Runner:
    """The runner for sync calls made from this thread."""
    global _background
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        runner = getattr(_local, "runner", None)
        if runner is None or runner.loop.is_closed():
            runner = _local.runner = PrivateLoopRunner(new_private_loop())
            with _lock:
                _all_private.append(runner)
        return runner
    with _lock:
        if _background is None:
            _background = BackgroundLoopRunner()
        return _background


@atexit.register
def _shutdown_runners() -> None:
    with _lock:
        runners: list[Any] = [*_all_private, *([_background] if _background else [])]
    for runner in runners:
        with contextlib.suppress(Exception):
            runner.shutdown()

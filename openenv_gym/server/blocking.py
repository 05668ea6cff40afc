"""Environments written with plain `def` methods run those methods in a thread, off the event loop."""

from __future__ import annotations

import asyncio
import inspect
from concurrent.futures import Executor, Future
from functools import partial
from typing import Any

from openenv_gym.adapters.environment import Environment
from openenv_gym.episode.results import ResetResult, StepResult

_METHODS = ("reset", "step", "close")


def is_blocking(env_class: type) -> bool:
    """True if any of reset/step/close is a plain function (it may block the event loop)."""
    return any(not inspect.iscoroutinefunction(getattr(env_class, name)) for name in _METHODS)


class OffLoop(Environment):
    """Wraps an environment with blocking methods; each such call runs in `executor`.

    A call that outlives its step timeout keeps its thread (threads cannot be killed); `close`
    then runs after that call returns, so the two never overlap.
    """

    def __init__(self, inner: Environment, executor: Executor) -> None:
        self.inner = inner
        self.executor = executor
        self.running: Future | None = None

    async def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        method = getattr(self.inner, name)
        if inspect.iscoroutinefunction(method):
            return await method(*args, **kwargs)
        self.running = self.executor.submit(partial(method, *args, **kwargs))
        return await asyncio.wrap_future(self.running)

    async def reset(self, *, seed=None, options=None) -> ResetResult:
        return await self._call("reset", seed=seed, options=options)

    async def step(self, action) -> StepResult:
        return await self._call("step", action)

    async def close(self) -> None:
        running = self.running
        if running is not None and not running.done():
            loop = asyncio.get_running_loop()
            running.add_done_callback(
                lambda _: loop.call_soon_threadsafe(loop.create_task, self._call("close"))
            )
            return
        await self._call("close")

    def extras(self) -> dict[str, Any]:
        tell = getattr(self.inner, "extras", None)
        return tell() if tell is not None else {}

    def episode_record(self) -> Any:
        keep = getattr(self.inner, "episode_record", None)
        return keep() if keep is not None else None

"""Sandboxes kept for the next episode: one that ended is renewed (sandbox.py) and kept a moment, so that a session
that resets again, or a new one, starts in it rather than in a new one. bubblewrap's start, its mounts and a new
network namespace are most of what a sandbox costs; renewing one is a few kills and unlinks. When a take leaves
none kept, sessions are coming faster than episodes end: one spare is made meanwhile, for the next.

    sandbox = await take(policy)   # a kept one, renewed, or a new one
    await give_back(sandbox)       # renewed and kept, or closed
    await drain()                  # at the worker's end: every kept one closed

Kept ones are closed after IDLE_SECONDS unused (OPENENV_GYM_SANDBOX_KEEP_SECONDS in the server's environment), so a
server at rest holds none (nor their processes)."""

from __future__ import annotations

import asyncio
import os
import time

from openenv_gym.sandbox import cgroups
from openenv_gym.sandbox.policy import SandboxPolicy
from openenv_gym.sandbox.sandbox import Sandbox

KEEP_SETTING = "OPENENV_GYM_SANDBOX_KEEP_SECONDS"
IDLE_SECONDS = float(os.environ.get(KEEP_SETTING, 2.0))  # a kept sandbox unused this long is closed
MOST_KEPT = 256  # per policy: past a burst, the rest are closed


class Pool:
    def __init__(self) -> None:
        self.kept: dict[SandboxPolicy, list[tuple[float, Sandbox]]] = {}
        self.expiry: asyncio.Task | None = None
        self.drained = False  # (episodes that end after the drain close their sandboxes)
        self.making: dict[SandboxPolicy, asyncio.Task] = {}  # a spare, made while sessions are coming

    async def take(self, policy: SandboxPolicy) -> Sandbox:
        kept = self.kept.setdefault(policy, [])
        try:
            while kept:
                _, sandbox = kept.pop()
                if sandbox.process.returncode is None:
                    return sandbox
                await sandbox.close()
            return await Sandbox.open(policy)
        finally:
            if not kept and policy not in self.making:  # sessions are coming: the next finds one made
                self.making[policy] = asyncio.get_running_loop().create_task(self._make_spare(policy))

    async def _make_spare(self, policy: SandboxPolicy) -> None:
        try:
            sandbox = await Sandbox.open(policy)
        except Exception:  # (the next take makes its own, and says why if it cannot)
            return
        finally:
            del self.making[policy]
        if self.drained:
            await sandbox.close()
            return
        self.kept.setdefault(policy, []).insert(0, (time.monotonic(), sandbox))  # (taken after the renewed ones)
        self._expire_later()

    async def give_back(self, sandbox: Sandbox) -> None:
        kept = self.kept.setdefault(sandbox.policy, [])
        if self.drained or len(kept) >= MOST_KEPT or not await _renewed(sandbox):
            await sandbox.close()
            return
        kept.append((time.monotonic(), sandbox))
        self._expire_later()

    def _expire_later(self) -> None:
        if self.expiry is None or self.expiry.done():
            self.expiry = asyncio.get_running_loop().create_task(self._expire())

    async def _expire(self) -> None:
        while any(self.kept.values()):
            await asyncio.sleep(IDLE_SECONDS / 4)
            cutoff = time.monotonic() - IDLE_SECONDS
            for kept in self.kept.values():
                stale = [sandbox for since, sandbox in kept if since < cutoff]
                kept[:] = [(since, sandbox) for since, sandbox in kept if since >= cutoff]
                for sandbox in stale:
                    await sandbox.close()

    async def drain(self) -> None:
        self.drained = True
        if self.expiry is not None:
            self.expiry.cancel()
        for making in list(self.making.values()):
            await asyncio.wait([making])
        kept, self.kept = self.kept, {}
        for sandboxes in kept.values():
            for _, sandbox in sandboxes:
                await sandbox.close()
        cgroups.remove_own()


async def _renewed(sandbox: Sandbox) -> bool:
    try:
        return await sandbox.renew()
    except OSError:  # (a file that would not go: the sandbox is closed instead, and its file systems with it)
        return False


_pools: dict[asyncio.AbstractEventLoop, Pool] = {}  # (a holder's process is its event loop's)


def _pool() -> Pool:
    loop = asyncio.get_running_loop()
    if loop not in _pools:
        for ended in [other for other in _pools if other.is_closed()]:
            del _pools[ended]
        _pools[loop] = Pool()
    return _pools[loop]


async def take(policy: SandboxPolicy) -> Sandbox:
    return await _pool().take(policy)


async def give_back(sandbox: Sandbox) -> None:
    await _pool().give_back(sandbox)


async def drain() -> None:
    await _pool().drain()

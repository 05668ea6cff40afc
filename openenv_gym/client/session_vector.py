"""A vector client over servers that take one request per session (ORS HTTP servers).

Same interface as AsyncVectorClient for RemoteVectorEnv (open, reset, step, step_and_reset, close):
each call gathers the sessions' own requests, since such servers have no batch frame to use.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import numpy as np

from openenv_gym.client.results import VectorResult, failure_outcome
from openenv_gym.errors import OpenEnvGymError


class SessionVectorClient:
    def __init__(self, backend: Any, num_envs: int) -> None:
        """backend: an unopened client with `open()`, `description`, `session()` and `close()` (OrsHttpClient)."""
        self.backend = backend
        self.num_envs = num_envs
        self.description: dict[str, Any] = {}
        self.sessions: list[Any] = []

    async def open(self) -> SessionVectorClient:
        await self.backend.open()
        self.description = self.backend.description
        self.sessions = [self.backend.session() for _ in range(self.num_envs)]
        return self

    async def close(self) -> None:
        await asyncio.gather(*(s.close() for s in self.sessions), return_exceptions=True)
        await self.backend.close()

    async def _run(self, envs: list[int], calls: list[Any], stepped: list[bool]) -> VectorResult:
        answers = await asyncio.gather(*calls, return_exceptions=True)
        obs, infos = [""] * len(envs), [{}] * len(envs)
        rewards = np.zeros(len(envs))
        terminated = np.zeros(len(envs), dtype=bool)
        truncated = np.zeros(len(envs), dtype=bool)
        errors: dict[int, OpenEnvGymError] = {}
        for k, (env, answer, was_step) in enumerate(zip(envs, answers, stepped, strict=True)):
            if isinstance(answer, Exception):
                obs[k], infos[k], truncated[k], alive = failure_outcome(answer, was_step)
                if not alive:
                    errors[env] = answer  # type: ignore[assignment]
            elif was_step:
                obs[k], rewards[k], terminated[k], truncated[k], infos[k] = answer
            else:
                obs[k], infos[k] = answer
        return VectorResult(np.asarray(envs, dtype=np.int64), obs, rewards, terminated, truncated, infos, errors)

    async def reset(self, ids: Sequence[int] | None = None, seed: Any = None,
                    options: dict | None = None) -> VectorResult:
        envs = list(range(self.num_envs)) if ids is None else [int(i) for i in ids]
        seeds = [None if seed is None else (seed + k if isinstance(seed, int) else seed[k]) for k in range(len(envs))]
        return await self._run(envs, [self.sessions[e].reset(s, options) for e, s in zip(envs, seeds, strict=True)],
                               [False] * len(envs))

    async def step(self, actions: Sequence[Any], ids: Sequence[int] | None = None) -> VectorResult:
        envs = list(range(self.num_envs)) if ids is None else [int(i) for i in ids]
        return await self._run(envs, [self.sessions[e].step(a) for e, a in zip(envs, actions, strict=True)],
                               [True] * len(envs))

    async def step_and_reset(self, actions: Sequence[Any], stepping: list[int], resetting: list[int],
                             seeds: Sequence[int | None] | None = None, options: dict | None = None) -> VectorResult:
        seeds = list(seeds) if seeds is not None else [None] * len(resetting)
        calls = {e: self.sessions[e].step(a) for e, a in zip(stepping, actions, strict=True)}
        calls |= {e: self.sessions[e].reset(s, options) for e, s in zip(resetting, seeds, strict=True)}
        envs = sorted(calls)
        return await self._run(envs, [calls[e] for e in envs], [e in set(stepping) for e in envs])

"""coin: a synthetic taskset for task samplers (benchmarks/samplers.py). Task i's observation names it; one reply
ends the episode, 1 for "win", 0 otherwise. How often a policy wins task i is the policy's to choose: the
benchmark's scripted policy wins it with a probability of its own per task, as a model would be better at some."""

from __future__ import annotations

import os
from typing import Any

from openenv_gym import Environment, ResetResult, StepResult

TASKS = int(os.environ.get("COIN_TASKS", "200"))


class CoinEnv(Environment):
    name = "coin"
    action_kind = "text"
    max_steps = 1
    reset_options = frozenset({"split", "index"})

    @classmethod
    async def catalog(cls) -> list[dict[str, Any]]:
        return [{"name": "train", "type": "train", "num_tasks": TASKS}]

    async def reset(self, *, seed=None, options=None) -> ResetResult:
        options = options or {}
        self.index = int(options.get("index", (seed or 0) % TASKS))
        return ResetResult(f"task {self.index}", {"task": self.index})

    async def step(self, action) -> StepResult:
        return StepResult("done", 1.0 if str(action).strip() == "win" else 0.0, terminated=True)

"""A CPU-bound environment: each step computes a pure-Python sum (about 0.5 ms), on the event loop."""

from openenv_gym import Environment, ResetResult, StepResult

WORK = 20_000


class CpuEnv(Environment):
    name = "cpu"

    async def reset(self, *, seed=None, options=None):
        return ResetResult("ready")

    async def step(self, action):
        total = 0
        for i in range(WORK):
            total += i * i % 7
        return StepResult(str(total), 1.0)

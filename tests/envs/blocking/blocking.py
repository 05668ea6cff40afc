"""A test environment written with blocking methods: step sleeps `float(action)` seconds."""

import time

from openenv_gym import Environment, ResetResult, StepResult


class BlockingEnv(Environment):
    name = "blocking"

    def reset(self, *, seed=None, options=None):
        return ResetResult("ready")

    def step(self, action):
        time.sleep(float(action))
        return StepResult(f"slept {action}")

    def close(self):
        pass

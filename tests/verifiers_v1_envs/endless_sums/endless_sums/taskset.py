"""endless-sums: add two numbers. The taskset never ends (INFINITE, as generated levels are) and making each task
takes time (as a level whose solution is found by simulation does): reading every task it could give never ends."""

import random
import re
import time
from collections.abc import Iterator
from itertools import count

import verifiers.v1 as vf

MAKING_A_TASK = 0.05  # seconds: the cost of making one task


class SumsData(vf.TaskData):
    answer: int


class SumsTask(vf.Task[SumsData]):
    @vf.stop
    async def one_turn(self, trace: vf.Trace) -> bool:
        return trace.num_turns >= 1

    @vf.reward(weight=1.0)
    async def correct(self, trace: vf.Trace) -> float:
        numbers = re.findall(r"-?\d+", trace.last_reply or "")
        return float(bool(numbers) and int(numbers[-1]) == self.data.answer)


class SumsConfig(vf.TasksetConfig):
    seed: int = 0
    """Where the stream of tasks starts."""
    digits: int = 2


class SumsTaskset(vf.Taskset[SumsTask, SumsConfig]):
    INFINITE = True

    def load(self) -> Iterator[SumsTask]:
        numbers = random.Random(self.config.seed)
        top = 10**self.config.digits
        for idx in count():
            time.sleep(MAKING_A_TASK)
            a, b = numbers.randrange(top), numbers.randrange(top)
            yield SumsTask(SumsData(idx=idx, id=f"sum-{idx}", prompt=f"What is {a} + {b}? Reply with the number.",
                                    answer=a + b), self.config.task)

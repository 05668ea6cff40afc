"""The receiving half of AsyncVectorClient: every answer, of a reset or a step, takes one path. A transport hands
it over as columns (`Answers`) to `_arrived`, which keeps it until a caller takes it (`recv`, `gather`), and
`_collect` turns what was taken into a VectorResult: a failed env reports its error (episode/state.py's
failure_outcome) and which envs run an episode is updated.
"""

from __future__ import annotations

import asyncio

import numpy as np

from openenv_gym.client.results import RESET, STEP, VectorResult, joined
from openenv_gym.client.transport import Answers, Pending
from openenv_gym.episode.state import failure_outcome
from openenv_gym.errors import OpenEnvGymError

Chunk = tuple[int, list[int], Answers]  # (kind, the envs answered, their answers)


class Arrivals:
    """The receiving half of AsyncVectorClient, which sets these attributes."""

    live: np.ndarray  # env -> an episode is running
    in_flight: np.ndarray  # env -> a request waits for its answer
    _all_ids: list[int]
    _all_array: np.ndarray
    _moved: dict[int, dict[str, str]]
    _pending: list[Pending]
    _prune_at: int
    _ready: list[Chunk]
    _ready_count: int
    _waiter: asyncio.Future | None
    _want: int

    def _arrived(self, kind: int, envs: list[int], answers: Answers) -> None:
        offsets = answers.offsets
        if type(offsets) is range and offsets.step == 1:
            answered = envs[offsets.start:offsets.stop]
        else:
            answered = [envs[o] for o in offsets]
        if self._moved and kind == RESET:
            for j, env in enumerate(answered):
                if env in self._moved:
                    answers.infos[j] = answers.infos[j] | {"moved": self._moved.pop(env)}
        self._ready.append((kind, answered, answers))
        self._ready_count += len(answered)
        if self._waiter is not None and self._ready_count >= self._want and not self._waiter.done():
            self._waiter.set_result(None)

    async def _wait_for(self, count: int, timeout: float | None) -> bool:
        """Wait until `count` answers are ready; False if `timeout` passed first."""
        if self._ready_count >= count:
            return True
        self._want = count
        self._waiter = asyncio.get_running_loop().create_future()
        try:
            async with asyncio.timeout(timeout):
                await self._waiter
        except TimeoutError:
            return False
        finally:
            self._waiter = None
        return True

    def _take(self, count: int | None = None) -> list[Chunk]:
        """Up to `count` of the answers that arrived (all by default), oldest first."""
        if count is None or count >= self._ready_count:
            taken, self._ready, self._ready_count = self._ready, [], 0
            return taken
        taken = []
        while count > 0:
            kind, envs, answers = self._ready[0]
            if len(envs) <= count:
                taken.append(self._ready.pop(0))
            else:  # split the chunk
                taken.append((kind, envs[:count], _slice(answers, 0, count)))
                self._ready[0] = (kind, envs[count:], _slice(answers, count, len(envs)))
            self._ready_count -= len(taken[-1][1])
            count -= len(taken[-1][1])
        return taken

    def _collect(self, chunks: list[Chunk], order: list[int] | None) -> VectorResult:
        """Turn answers into a VectorResult: in arrival order, or ordered like `order` (exactly the answered envs).

        Plain lists in the loop and numpy conversions at the end: element-wise numpy writes cost
        about 100 ns each, several per env.
        """
        if order is not None and len(chunks) > 1:
            chunks.sort(key=lambda chunk: chunk[1][0])  # lock-step batches are contiguous blocks of envs
        envs: list[int] = []
        obs: list[str] = []
        rewards: list[float] = []
        terminated: list[bool] = []
        truncated: list[bool] = []
        infos: list[dict] = []
        failures: list[tuple[int, int, Exception]] = []
        for kind, answered, answers in chunks:
            if answers.errors is not None:
                failures += [(len(envs) + j, kind, e) for j, e in enumerate(answers.errors) if e is not None]
            envs += answered
            obs += answers.obs
            rewards += answers.rewards
            terminated += answers.terminated
            truncated += answers.truncated
            infos += answers.infos
        term = np.array(terminated, dtype=bool)
        trunc = np.array(truncated, dtype=bool)
        alive = ~(term | trunc)
        errors: dict[int, OpenEnvGymError] = {}
        for k, kind, error in failures:
            obs[k], infos[k], trunc[k], alive[k] = failure_outcome(error, stepped=kind == STEP)
            if not alive[k]:
                errors[envs[k]] = error  # type: ignore[assignment]
        ids = self._all_array if envs == self._all_ids else np.asarray(envs, dtype=np.int64)
        self.in_flight[ids] = False
        self.live[ids] = alive
        if not self.in_flight.any():  # let answers go at once: kept, they would weigh on the garbage collector
            self._pending.clear()
        elif len(self._pending) > self._prune_at:  # EnvPool-style sends leave one per call: drop the done now and then
            self._pending = [pending for pending in self._pending if not pending.done]
            self._prune_at = 2 * len(self._pending) + 64
        result = VectorResult(ids, obs, np.array(rewards, dtype=np.float64), term, trunc, infos, errors)
        return result if order is None or envs == order else joined([result], order)


def _slice(answers: Answers, start: int, stop: int) -> Answers:
    return Answers(answers.offsets[start:stop], answers.obs[start:stop], answers.rewards[start:stop],
                   answers.terminated[start:stop], answers.truncated[start:stop], answers.infos[start:stop],
                   None if answers.errors is None else answers.errors[start:stop])

"""The samplers: in order, uniform, RFC 013's curriculum, and prime-rl's difficulty pools."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from openenv_gym.sampling.base import CostFunction, Sampler


class SequentialSampler(Sampler):
    """The catalog in order, round after round."""

    def __init__(self, tasks: Sequence[dict[str, Any]] | str, *, group_size: int, seed: int | None = None) -> None:
        super().__init__(tasks, group_size=group_size, seed=seed)
        self.position = 0

    def sample(self, n: int) -> list[dict[str, Any]]:
        chosen = [dict(self.tasks[(self.position + k) % len(self.tasks)]) for k in range(n)]
        self.position = (self.position + n) % len(self.tasks)
        return chosen

    def learned(self) -> dict[str, Any]:
        return {"position": self.position}

    def restore(self, learned: dict[str, Any]) -> None:
        self.position = learned["position"]


class UniformSampler(Sampler):
    """Every task as likely as any other."""

    def sample(self, n: int) -> list[dict[str, Any]]:
        return self.weighted(np.ones(len(self.tasks)), n)


class CurriculumSampler(Sampler):
    """RFC 013's curriculum: a task is drawn in proportion to the chance that a group of G played on it carries a
    gradient (its members' rewards differ), per unit of its cost:

        w = ((1 - p^G - (1 - p)^G) + epsilon) / c,   raised to `power`

    p is the task's success rate, Beta(1, 1)-smoothed over its decayed counts (each group's counts kept at `decay`
    per later group of the task; a reward in [0, 1] counts as that much success); c is its mean cost per group:
    `cost="episodes"` (G per group), "tokens" or "seconds" (the costs update() is given), or a function of the
    task's reset options. With power=1 these are RFC 013's weights exactly; the default power sharpens them."""

    def __init__(self, tasks: Sequence[dict[str, Any]] | str, *, group_size: int, seed: int | None = None,
                 cost: str | CostFunction = "episodes", decay: float = 0.9, epsilon: float = 0.01,
                 power: float = 4.0) -> None:
        super().__init__(tasks, group_size=group_size, seed=seed)
        if not ((isinstance(cost, str) and cost in ("episodes", "tokens", "seconds")) or callable(cost)):
            raise ValueError(f"cost must be 'episodes', 'tokens', 'seconds' or a function of a task, got {cost!r}")
        if not 0 < decay <= 1:
            raise ValueError(f"decay must be in (0, 1], got {decay}")
        self.cost_of, self.decay, self.epsilon, self.power = cost, decay, epsilon, power
        if cost in ("tokens", "seconds"):
            self.costs_in = cost
        size = len(self.tasks)
        self.successes, self.failures = np.zeros(size), np.zeros(size)
        self.spent, self.played = np.zeros(size), np.zeros(size)  # each task's cost and groups, for its mean cost
        self.given_cost = np.array([float(cost(task)) for task in self.tasks]) if callable(cost) else None
        self.weights = np.empty(size)
        self._weigh(np.arange(size))

    def sample(self, n: int) -> list[dict[str, Any]]:
        if self.cost_of in ("tokens", "seconds"):  # a task not played yet costs the mean so far, which moves
            self._weigh(np.flatnonzero(self.played == 0))
        return self.weighted(self.weights, n)

    def success_rate(self, k: int | np.ndarray) -> Any:
        return (1 + self.successes[k]) / (2 + self.successes[k] + self.failures[k])

    def learn(self, k: int, rewards: list[float], cost: float) -> None:
        scored = float(np.clip(rewards, 0.0, 1.0).sum())
        self.successes[k] = self.decay * self.successes[k] + scored
        self.failures[k] = self.decay * self.failures[k] + len(rewards) - scored
        self.spent[k] += cost
        self.played[k] += 1
        self._weigh(np.array([k]))

    def _weigh(self, ks: np.ndarray) -> None:
        p, g = self.success_rate(ks), self.group_size
        signal = 1 - p**g - (1 - p) ** g
        self.weights[ks] = ((signal + self.epsilon) / self._mean_cost(ks)) ** self.power

    def _mean_cost(self, ks: np.ndarray) -> np.ndarray:
        if self.given_cost is not None:
            return np.maximum(self.given_cost[ks], 1e-12)
        if self.cost_of == "episodes":
            return np.full(len(ks), float(self.group_size))
        seen = self.played > 0  # a task not played yet costs what the tasks played cost on average
        typical = self.spent[seen].sum() / self.played[seen].sum() if seen.any() else 1.0
        return np.where(self.played[ks] > 0, self.spent[ks] / np.maximum(self.played[ks], 1), typical).clip(1e-12)

    def learned(self) -> dict[str, Any]:
        return {"successes": self.successes.tolist(), "failures": self.failures.tolist(), "spent": self.spent.tolist(),
                "played": self.played.tolist()}

    def restore(self, learned: dict[str, Any]) -> None:
        for name in ("successes", "failures", "spent", "played"):
            getattr(self, name)[:] = learned[name]
        self._weigh(np.arange(len(self.tasks)))


DEFAULT_POOLS = {"hard": (0.25, 0.2), "normal": (0.75, 1.0), "easy": (1.0, 0.2)}  # name: (mean at most, weight)


class DifficultyPoolSampler(Sampler):
    """prime-rl's difficulty pools: a task is in the pool of its latest group's mean reward (hard: at most 0.25,
    normal: at most 0.75, easy: the rest; a task not played yet is normal), and drawn with its pool's weight."""

    def __init__(self, tasks: Sequence[dict[str, Any]] | str, *, group_size: int, seed: int | None = None,
                 pools: dict[str, tuple[float, float]] | None = None, start: str = "normal") -> None:
        super().__init__(tasks, group_size=group_size, seed=seed)
        self.pools = dict(pools or DEFAULT_POOLS)
        if start not in self.pools:
            raise ValueError(f"start pool {start!r} is not among the pools: {', '.join(self.pools)}")
        self.bounds = sorted((bound, name) for name, (bound, _) in self.pools.items())
        self.pool = [start] * len(self.tasks)
        self.weights = np.full(len(self.tasks), self.pools[start][1])

    def sample(self, n: int) -> list[dict[str, Any]]:
        return self.weighted(self.weights, n)

    def pool_of(self, mean: float) -> str:
        return next((name for bound, name in self.bounds if mean <= bound), self.bounds[-1][1])

    def learn(self, k: int, rewards: list[float], cost: float) -> None:
        self.pool[k] = self.pool_of(sum(rewards) / len(rewards))
        self.weights[k] = self.pools[self.pool[k]][1]

    def sizes(self) -> dict[str, int]:
        return {name: self.pool.count(name) for name in self.pools}

    def metrics(self) -> dict[str, float]:
        return super().metrics() | {f"pool_{name}": count for name, count in self.sizes().items()}

    def learned(self) -> dict[str, Any]:
        return {"pool": self.pool}

    def restore(self, learned: dict[str, Any]) -> None:
        self.pool = list(learned["pool"])
        self.weights = np.array([self.pools[name][1] for name in self.pool])


SAMPLERS = {"sequential": SequentialSampler, "uniform": UniformSampler, "curriculum": CurriculumSampler,
            "pools": DifficultyPoolSampler}  # by the names the command line takes

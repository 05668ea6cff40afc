"""What every sampler shares: the catalog (reset options, one per task), the counts behind the metrics, a seeded
generator, and state that a JSON file holds. A sampler chooses among tasks by weights it keeps (samplers.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np
import orjson

SIGNAL_TOLERANCE = 1e-6  # a group whose rewards span no more than this carries no gradient (GRPO's advantage is 0)


def has_signal(rewards: Sequence[float], tolerance: float = SIGNAL_TOLERANCE) -> bool:
    """Whether a group's rewards differ: whether GRPO learns anything from it."""
    return max(rewards) - min(rewards) > tolerance


@runtime_checkable
class TaskSampler(Protocol):
    """RFC 013's sampler: code written against it runs on every sampler here."""

    def sample(self, n: int) -> list[dict[str, Any]]: ...
    def update(self, task: dict[str, Any], rewards: Sequence[float], costs: Sequence[float] | None = None) -> None: ...
    def state_dict(self) -> dict[str, Any]: ...
    def load_state_dict(self, state: dict[str, Any]) -> None: ...
    def metrics(self) -> dict[str, float]: ...


def catalog(env: str, split: str | None = None, **make_kwargs: Any) -> list[dict[str, Any]]:
    """The reset options of every task of an environment (`{"split": ..., "index": ...}`), from its splits: a gym id
    or an environment's name or folder (a local server is started for it) or a server's URL (`ws://`, `http://`);
    `split` keeps one."""
    if "://" in env or env.startswith("openenv/"):
        splits = _splits(env, make_kwargs)
    else:
        from openenv_gym.client.local import LocalServer

        with LocalServer(env, 1, 16) as server:
            splits = _splits(server.url, make_kwargs)
    return tasks_of(splits, split, env)


def tasks_of(splits: list[dict[str, Any]], split: str | None, env: str) -> list[dict[str, Any]]:
    """The reset options of every task of these splits (of `split` alone, if given); ValueError naming `env` where
    there are none."""
    chosen = [s for s in splits if split is None or s["name"] == split]
    if not chosen:
        names = ", ".join(s["name"] for s in splits) or "none"
        raise ValueError(f"{env} has no split {split!r} (its splits: {names})" if split else
                         f"{env} lists no tasks (it has no task catalog): give the sampler its tasks as reset options")
    return [{"split": s["name"], "index": index} for s in chosen for index in range(s["num_tasks"])]


def _splits(env: str, make_kwargs: dict[str, Any]) -> list[dict[str, Any]]:
    import gymnasium as gym

    from openenv_gym.registry import register_all

    register_all()
    target = ("openenv/remote", {"base_url": env}) if "://" in env else (env, {})
    made = gym.make(target[0], **(target[1] | make_kwargs))
    try:
        return made.unwrapped.splits()
    finally:
        made.close()


class Sampler:
    """The bookkeeping of every sampler: which task a reset-options dict is, and the counts behind `metrics()`."""

    # what update()'s costs are counted in, so that a rollout gives them: "episodes" (none given), "tokens" (the
    # completion tokens of an episode's turns) or "seconds" (the environment's time, the final step's env_seconds)
    costs_in = "episodes"

    def __init__(self, tasks: Sequence[dict[str, Any]] | str, *, group_size: int, seed: int | None = None) -> None:
        self.tasks = catalog(tasks) if isinstance(tasks, str) else [dict(task) for task in tasks]
        if not self.tasks:
            raise ValueError("a sampler needs at least one task")
        if group_size < 1:
            raise ValueError(f"group_size must be at least 1, got {group_size}")
        self.group_size = group_size
        self.index = {_key(task): k for k, task in enumerate(self.tasks)}
        if len(self.index) < len(self.tasks):
            raise ValueError("the tasks hold the same reset options twice: each task once")
        self.rng = np.random.default_rng(seed)
        self.groups = self.episodes = self.signal_groups = 0
        self.cost = 0.0
        self.dropped = self.short = 0  # groups a gate dropped; groups a batch went out without (rollouts' gates)

    def task_of(self, task: dict[str, Any]) -> int:
        try:
            return self.index[_key(task)]
        except KeyError:
            raise ValueError(f"{task!r:.200} is not a task of this sampler (give update() the reset options sample() "
                             "gave)") from None

    def update(self, task: dict[str, Any], rewards: Sequence[float], costs: Sequence[float] | None = None) -> None:
        """The rewards of one group played on `task` (and what each episode cost: tokens, seconds; default one
        episode each)."""
        k = self.task_of(task)
        rewards = [float(r) for r in rewards]
        if not rewards:
            raise ValueError("update() needs the rewards of the group's episodes, got none")
        cost = float(sum(costs)) if costs is not None else float(len(rewards))
        signal = has_signal(rewards)
        self.groups += 1
        self.episodes += len(rewards)
        self.signal_groups += signal
        self.cost += cost
        self.learn(k, rewards, cost)

    def note(self, what: str) -> None:
        """Count a group a gate dropped ("dropped") or one a batch went out without ("short")."""
        if what not in ("dropped", "short"):
            raise ValueError(f"note takes 'dropped' or 'short', got {what!r:.40}")
        setattr(self, what, getattr(self, what) + 1)

    def learn(self, k: int, rewards: list[float], cost: float) -> None:
        """What the sampler learns from task k's group (nothing, for those that do not learn)."""

    def metrics(self) -> dict[str, float]:
        return {"groups": self.groups, "episodes": self.episodes, "signal_groups": self.signal_groups,
                "signal_groups_per_episode": self.signal_groups / self.episodes if self.episodes else 0.0,
                "signal_groups_per_cost": self.signal_groups / self.cost if self.cost else 0.0,
                "zero_signal_fraction": 1 - self.signal_groups / self.groups if self.groups else 0.0,
                "groups_dropped": self.dropped, "groups_short": self.short}

    def state_dict(self) -> dict[str, Any]:
        """All the sampler knows, JSON-serialisable: `load_state_dict` on a sampler of the same tasks resumes it."""
        return {"sampler": type(self).__name__, "tasks": len(self.tasks),
                "rng": _portable(self.rng.bit_generator.state),
                "counts": {"groups": self.groups, "episodes": self.episodes, "signal_groups": self.signal_groups,
                           "cost": self.cost, "dropped": self.dropped, "short": self.short},
                "learned": self.learned()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state.get("sampler") != type(self).__name__ or state.get("tasks") != len(self.tasks):
            raise ValueError(f"a state of {state.get('sampler')} over {state.get('tasks')} tasks does not fit a "
                             f"{type(self).__name__} over {len(self.tasks)}")
        self.rng.bit_generator.state = _native(state["rng"])
        counts = state["counts"]
        self.groups, self.episodes = counts["groups"], counts["episodes"]
        self.signal_groups, self.cost = counts["signal_groups"], counts["cost"]
        self.dropped, self.short = counts["dropped"], counts["short"]
        self.restore(state["learned"])

    def learned(self) -> dict[str, Any]:
        return {}

    def restore(self, learned: dict[str, Any]) -> None:
        """Take back what `learned()` gave."""

    def weighted(self, weights: np.ndarray, n: int) -> list[dict[str, Any]]:
        """n tasks drawn by weight, each at most once per round of the whole catalog (Efraimidis and Spirakis' keys:
        the n largest of log(u) / w)."""
        chosen: list[int] = []
        while len(chosen) < n:
            take = min(n - len(chosen), len(self.tasks))
            keys = np.log(self.rng.random(len(self.tasks))) / np.maximum(weights, 1e-300)
            top = np.argpartition(-keys, take - 1)[:take] if take < len(self.tasks) else np.arange(len(self.tasks))
            chosen.extend(int(k) for k in top[np.argsort(-keys[top])])
        return [dict(self.tasks[k]) for k in chosen]


def _portable(value: Any) -> Any:
    """A generator's state with its 128-bit integers as strings: JSON that every parser reads (orjson and
    JavaScript stop at 64 bits)."""
    if isinstance(value, dict):
        return {key: _portable(item) for key, item in value.items()}
    return str(value) if isinstance(value, int) and not -(2**63) <= value < 2**63 else value


def _native(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _native(item) for key, item in value.items()}
    return int(value) if isinstance(value, str) and value.lstrip("-").isdigit() else value


def _key(task: dict[str, Any]) -> bytes:
    return orjson.dumps(task, option=orjson.OPT_SORT_KEYS)


CostFunction = Callable[[dict[str, Any]], float]

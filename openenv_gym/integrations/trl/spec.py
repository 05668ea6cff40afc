"""`spec(env_id)`: one object holding all GRPOTrainer needs of an env, as TRL's own `OpenRewardSpec` does:

    env = spec("openenv/guess", num_tasks=64)
    trainer = GRPOTrainer(model, args=..., train_dataset=env.train_dataset,
                          environment_factory=env.environment_factory, reward_funcs=env.reward_funcs)

`train_dataset` is the env's task catalog as rows (the tasks of its train split, or of the split named; an env
with no catalog: seeds), with no answers in them; `environment_factory` is environment_factory(env_id); and
`reward_funcs` is empty, since the class's `get_reward()` is the reward and TRL (1.16) takes it from the class.
With a task sampler (`sampler=`, openenv_gym.sampling), the rows name no task: the sampler chooses each group's.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

from openenv_gym.env import RemoteEnv
from openenv_gym.integrations.trl.factory import EnvClass, environment_factory
from openenv_gym.integrations.trl.tasks import dataset

SEEDED_TASKS = 64  # rows of an env with no catalog, when num_tasks is not given


class EnvSpec:
    def __init__(self, env_id: str, *, num_tasks: int | None = None, split: str | None = None, seed: int = 0,
                 prompt: str = "", workers: int | None = None, sampler: Any = None, **make_kwargs: Any) -> None:
        """num_tasks: rows at most (default: every task of the split; for an env with no catalog, 64 seeds).
        split: the split whose tasks the rows are (default: the env's train split, else its first). seed: the first
        seed, for an env with no catalog. prompt: the user message each row begins with (the env's first
        observation is appended to it). sampler: a task sampler that chooses each group's task (the rows, as many
        as its tasks unless num_tasks, then only set the prompt). make_kwargs: what gym.make takes (base_url,
        options, env_args, ...)."""
        if num_tasks is not None and num_tasks < 1:
            raise ValueError(f"num_tasks must be at least 1, got {num_tasks}")
        self.env_id, self.num_tasks, self.split, self.seed, self.prompt = env_id, num_tasks, split, seed, prompt
        self.sampler = sampler
        self._factory_arguments = {"workers": workers, "sampler": sampler, **make_kwargs}

    @cached_property
    def environment_factory(self) -> EnvClass:
        return environment_factory(self.env_id, **self._factory_arguments)

    @cached_property
    def train_dataset(self) -> Any:
        if self.sampler is not None:
            rows = self.num_tasks or len(getattr(self.sampler, "tasks", ())) or SEEDED_TASKS
            return dataset(rows, prompt=self.prompt, sampled=True)
        probe = RemoteEnv(target=self.environment_factory.target)
        try:
            splits = probe.splits()
        finally:
            probe.close()
        if not splits:
            if self.split is not None:
                raise ValueError(f"{self.env_id} has no task splits, so none named {self.split!r}; leave split out "
                                 "(its rows are then seeds)")
            return dataset(self.num_tasks or SEEDED_TASKS, seed=self.seed, prompt=self.prompt)
        chosen = _split(splits, self.split, self.env_id)
        size = chosen["num_tasks"] if self.num_tasks is None else min(self.num_tasks, chosen["num_tasks"])
        return dataset(size, split=chosen["name"], prompt=self.prompt)

    @property
    def reward_funcs(self) -> list[Any]:
        return []


def _split(splits: list[dict[str, Any]], name: str | None, env_id: str) -> dict[str, Any]:
    if name is None:
        return next((s for s in splits if s.get("type") == "train"), splits[0])
    for split in splits:
        if split["name"] == name:
            return split
    raise ValueError(f"{env_id} has no split {name!r}; its splits: {', '.join(s['name'] for s in splits)}")


def spec(env_id: str, **options: Any) -> EnvSpec:
    """An EnvSpec of `env_id` (see EnvSpec for the options)."""
    return EnvSpec(env_id, **options)

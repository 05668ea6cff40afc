"""The taskset: the catalog of an openenv-gym server, one task per reset options."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import verifiers.v1 as vf

from openenv_gym.sampling import catalog


class OpenEnvGymData(vf.TaskData):
    options: dict[str, Any] = {}
    """The reset options of the task's episode: {"split": ..., "index": ...}, or any the env reads."""
    seed: int | None = None
    """The reset's seed (an env without a catalog may choose its task by it)."""


class OpenEnvGymConfig(vf.TasksetConfig):
    url: str
    """The openenv-gym server of the environment (ws:// or http://)."""
    split: str | None = None
    """The catalog's split to load (default: every split)."""
    tasks: list[dict[str, Any]] | None = None
    """The reset options of each task, instead of the catalog (an env without one, or a few of its tasks)."""


class OpenEnvGymTask(vf.Task[OpenEnvGymData]):
    pass


class OpenEnvGymTaskset(vf.Taskset[OpenEnvGymTask, OpenEnvGymConfig]):
    def load(self) -> Iterator[OpenEnvGymTask]:
        config = self.config
        for options in config.tasks if config.tasks is not None else catalog(config.url, config.split):
            name = f"{options['split']}#{options['index']}" if {"split", "index"} <= options.keys() else None
            yield OpenEnvGymTask(OpenEnvGymData(name=name, prompt=None, options=options), config.task)

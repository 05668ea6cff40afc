"""The taskset: the catalog of an openenv-gym server, a task's data its reset options.

A task's data is the TaskData of Verifiers (name, prompt None: the env opens the exchange) whose own fields are the
reset options of its episode, in our vocabulary: {"split": "train", "index": 3}, {"task": 5}, or any the env reads;
`seed` is the reset's seed. What prime-rl sends as `task_data` is such a dump. An env served from a Verifiers v1
taskset is given the whole dump instead, its own TaskData (env.py), which it validates into its own type.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import verifiers.v1 as vf
from pydantic import ConfigDict

from openenv_gym.sampling import catalog


class OpenEnvGymData(vf.TaskData):
    model_config = ConfigDict(frozen=True, extra="allow")  # (its own fields: the reset options)
    seed: int | None = None
    """The reset's seed (an env without a catalog may choose its task by it)."""

    def reset_options(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


class OpenEnvGymConfig(vf.TasksetConfig):
    url: str
    """The openenv-gym server of the environment (ws:// or http://)."""
    split: str | None = None
    """The catalog's split to load (default: every split)."""
    tasks: list[dict[str, Any]] | None = None
    """The reset options of each task, instead of the catalog (an env without one, or a few of its tasks)."""


class OpenEnvGymTask(vf.Task[OpenEnvGymData]):
    pass


class RepliesTakenTask(OpenEnvGymTask):
    """A run's task, for an env that may take the model's reply as another (a v1 task's own response intercept):
    the env is stepped with the reply at the model boundary (`take`: the text it took the reply as, or None), and
    the trace keeps the reply as the env took it, as Verifiers keeps an intercept's rewrite in its own trace."""

    def __init__(self, task: OpenEnvGymTask, take: Callable[[vf.AssistantMessage], Awaitable[str | None]]) -> None:
        super().__init__(task.data, task.config)
        self.take = take

    @vf.intercept
    async def as_the_env_took_it(self, response: vf.Response) -> vf.Response | None:
        taken = await self.take(response.message)
        return None if taken is None else response.model_copy(update={"message": vf.AssistantMessage(content=taken)})


class OpenEnvGymTaskset(vf.Taskset[OpenEnvGymTask, OpenEnvGymConfig]):
    def load(self) -> Iterator[OpenEnvGymTask]:
        config = self.config
        for options in config.tasks if config.tasks is not None else catalog(config.url, config.split):
            name = ",".join(f"{key}={value}" for key, value in options.items())[:200]  # (split=train,index=3)
            yield OpenEnvGymTask(OpenEnvGymData(name=name, prompt=None, **options), config.task)

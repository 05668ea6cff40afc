"""One task sampler for every Ray rollout worker: the driver's sampler, moved into a Ray actor for the run, which
the workers ask for each group's task and give each group's rewards (one round trip of Ray's each). When the run
ends, what the actor learned is loaded back into the driver's sampler, so its metrics and state are the run's.
A sampler that is a server's already (sampling.ServerSampler) goes to the workers as its address instead."""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import ray

from openenv_gym.episode.state import cost_unit
from openenv_gym.sampling import ServerSampler


class _Held:
    """The actor's side: the sampler itself."""

    def __init__(self, sampler: Any) -> None:
        self.sampler = copy.deepcopy(sampler)  # (Ray hands it over with its numpy arrays read-only)

    def sample(self, n: int) -> list[dict[str, Any]]:
        return self.sampler.sample(n)

    def update(self, task: dict[str, Any], rewards: Sequence[float], costs: Sequence[float] | None) -> None:
        self.sampler.update(task, rewards, costs)

    def note(self, what: str) -> None:
        if hasattr(self.sampler, "note"):
            self.sampler.note(what)

    def metrics(self) -> dict[str, float]:
        return self.sampler.metrics()

    def state_dict(self) -> dict[str, Any]:
        return self.sampler.state_dict()


class ActorSampler:
    """A worker's side: RFC 013's calls, made on the actor."""

    def __init__(self, actor: Any, group_size: int, costs_in: str) -> None:
        self.actor, self.group_size, self.costs_in = actor, group_size, costs_in

    def sample(self, n: int) -> list[dict[str, Any]]:
        return ray.get(self.actor.sample.remote(n))

    def update(self, task: dict[str, Any], rewards: Sequence[float], costs: Sequence[float] | None = None) -> None:
        ray.get(self.actor.update.remote(task, list(rewards), None if costs is None else list(costs)))

    def note(self, what: str) -> None:
        ray.get(self.actor.note.remote(what))

    def metrics(self) -> dict[str, float]:
        return ray.get(self.actor.metrics.remote())

    def state_dict(self) -> dict[str, Any]:
        return ray.get(self.actor.state_dict.remote())

    def load_state_dict(self, state: dict[str, Any]) -> None:
        raise ValueError("a Ray run's sampler is the driver's: load its state there, before the run")


@contextmanager
def shared(sampler: Any) -> Iterator[Any]:
    """What the workers get for `sampler` during a run: the sampler itself where it is a server's, else a handle on
    an actor holding it (the driver's sampler takes back its state when the run ends)."""
    if sampler is None or isinstance(sampler, ServerSampler):
        yield sampler
        return
    actor = ray.remote(_Held).options(num_cpus=0).remote(sampler)
    try:
        yield ActorSampler(actor, sampler.group_size, cost_unit(sampler))
    finally:  # (a run left early too: what its groups taught is kept)
        if hasattr(sampler, "load_state_dict"):
            sampler.load_state_dict(ray.get(actor.state_dict.remote()))
        ray.kill(actor)

"""`rollouts()` as Ray tasks: one `openenv_gym.rollouts` stream per Ray worker, for trainers sharded over a
cluster, merged into one iterator of finished episodes in the order they finish.

    servers = openenv_gym.ray.serve("openenv/guess", num_servers=4)
    for episode in openenv_gym.ray.rollouts("openenv/guess", policy, base_url=servers, num_workers=8,
                                            num_envs=256, episodes=10_000, seed=0):
        buffer.add(episode)

Each worker is a streaming Ray task: it yields each episode as it finishes, so the first ones arrive while the
rest still play. The policy travels to the workers (it must pickle: OpenAIPolicy does). Leaving the loop
early cancels the workers, which close their sessions.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import ray

from openenv_gym.ray.samplers import shared
from openenv_gym.rollout.records import Episode
from openenv_gym.rollout.stream import rollouts as stream_rollouts
from openenv_gym.rollout.turns import Policy
from openenv_gym.runtime.loops import new_event_loop

SEED_STRIDE = 1_000_000  # without `episodes`, worker k starts at seed + k * SEED_STRIDE


def _play(env_id: str, policy: Policy, kwargs: dict[str, Any]) -> Iterator[Episode]:
    """A worker: its own rollouts stream, stepped on an event loop of its own between yields."""
    loop = new_event_loop()
    stream = stream_rollouts(env_id, policy, **kwargs)
    try:
        while True:
            try:
                episode = loop.run_until_complete(anext(stream))
            except StopAsyncIteration:
                return
            yield episode
    finally:
        loop.run_until_complete(stream.aclose())
        loop.close()


def _shares(total: int, parts: int) -> list[int]:
    return [(k + 1) * total // parts - k * total // parts for k in range(parts)]


def rollouts(env_id: str, policy: Policy, *, base_url: Any, num_workers: int, num_envs: int,
             episodes: int | None = None, tasks: Sequence[dict[str, Any]] | None = None, seed: int | None = None,
             num_cpus: float = 1.0, sampler: Any = None, **rollout_kwargs: Any) -> Iterator[Episode]:
    """Finished episodes of `env_id` played by `policy` in `num_workers` Ray tasks of `num_envs` sessions each.

    base_url: the servers (an EnvServers handle from serve(), or URLs every worker can reach).
    episodes: how many in all; each worker plays a contiguous block of them, so episode i of the whole gets
        seed + i as in one stream (without `episodes`, worker k starts at seed + k * SEED_STRIDE).
    tasks: reset options of successive episodes, a list split into contiguous blocks the same way.
    num_cpus: CPUs each worker reserves from Ray.
    sampler: a task sampler (openenv_gym.sampling) that chooses each group's task (give group_size, and
        `episodes` counts groups), one for every worker: it is held by a Ray actor during the run and takes back
        what it learned at its end (a ServerSampler: each worker asks its server).
    rollout_kwargs: what openenv_gym.rollouts takes besides (max_turns, system_prompt, token, options, ...).
    """
    if num_workers < 1 or num_envs < 1:
        raise ValueError(f"num_workers and num_envs must be at least 1, got {num_workers} and {num_envs}")
    if tasks is not None and not isinstance(tasks, Sequence):
        raise TypeError("tasks must be a list (each worker plays every num_workers-th one), not an iterator")
    total = episodes if episodes is not None else None if tasks is None else len(tasks)
    shares = [None] * num_workers if total is None else _shares(total, num_workers)
    with shared(sampler) as chooser:
        yield from _merged(env_id, policy, shares, rollout_kwargs | {"base_url": base_url, "num_envs": num_envs}
                           | ({} if chooser is None else {"sampler": chooser}), episodes, tasks, seed, num_cpus)


def _merged(env_id: str, policy: Policy, shares: list[int | None], common: dict[str, Any], episodes: int | None,
            tasks: Sequence[dict[str, Any]] | None, seed: int | None, num_cpus: float) -> Iterator[Episode]:
    """Each worker's stream started, their episodes as they finish."""
    worker = ray.remote(_play).options(num_returns="streaming", num_cpus=num_cpus)
    streams, start = [], 0
    for k, share in enumerate(shares):
        kwargs = dict(common)
        if episodes is not None:
            kwargs["episodes"] = share
        if tasks is not None:
            kwargs["tasks"] = list(tasks[start:start + share])
        if seed is not None:
            kwargs["seed"] = seed + (start if share is not None else k * SEED_STRIDE)
        streams.append(worker.remote(env_id, policy, kwargs))
        start += share or 0
    try:
        while streams:
            ready, _ = ray.wait(streams, num_returns=1)
            for stream in ready:
                try:
                    reference = next(stream)
                except StopIteration:
                    streams.remove(stream)
                    continue
                yield ray.get(reference)
    finally:
        for stream in streams:
            ray.cancel(stream)

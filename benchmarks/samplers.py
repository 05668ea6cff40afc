"""Task samplers on a synthetic taskset, in one run: how many GRPO groups carry signal per 1,000 episodes.

The taskset (benchmarks/envs/coin, served on loopback): 200 tasks; a scripted stochastic policy wins task i with
probability p_i, the p_i drawn from Beta(0.5, 0.5) (most tasks nearly always or nearly never won, as a model's
are). G = 8, 2,500 groups per sampler, through `openenv_gym.rollouts(..., sampler=...)`. A second part plays
batches of a small catalog in which most tasks are always won, through a ZeroSignalGate, and counts the batches
that came out empty. A third times the samplers' own work at 100,000 tasks, and a fourth what a server's sampler
(`serve --sampler`, two workers, the sampler in the serving process) adds over the wire to a `sample` of 64 and to
an `update`, against the same sampler in the caller's process, at 100,000 tasks.

    python -m benchmarks.samplers [--groups 2500] [--out benchmarks/results/samplers.json]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import time
from pathlib import Path

import numpy as np

import openenv_gym
from openenv_gym.client.local import LocalServer
from openenv_gym.sampling import (
    CurriculumSampler,
    DifficultyPoolSampler,
    ServerSampler,
    UniformSampler,
    ZeroSignalGate,
    catalog,
)

HERE = Path(__file__).parent
COIN = HERE / "envs" / "coin"
TASK = re.compile(r"task (\d+)")


def policy_winning(chances: np.ndarray, seed: int):
    """A scripted stochastic policy: it wins task i with probability chances[i]."""
    rng = np.random.default_rng(seed)

    async def policy(messages, tools):
        task = int(TASK.search(messages[-1]["content"]).group(1))
        return "win" if rng.random() < chances[task] else "lose"
    return policy


async def play(url: str, sampler, policy, groups: int, group_size: int, gates=(), max_extra=None) -> list:
    stream = openenv_gym.rollouts("openenv/remote", policy, num_envs=64, group_size=group_size, episodes=groups,
                                  sampler=sampler, gates=gates, max_extra=max_extra, base_url=url)
    async with contextlib.aclosing(stream) as played:
        return [group async for group in played]


def signal_per_thousand(url: str, tasks: list, make, chances: np.ndarray, groups: int, seed: int) -> dict:
    sampler = make(tasks, seed)
    asyncio.run(play(url, sampler, policy_winning(chances, seed), groups, 8))
    metrics = sampler.metrics()
    return {"signal_groups_per_1000_episodes": 1000 * metrics["signal_groups_per_episode"],
            "groups": metrics["groups"]}


def empty_batches(url: str, batches: int, seed: int) -> dict:
    """Batches of 8 groups from 10 tasks, 8 of them always won, through a ZeroSignalGate (as many extra groups as
    the batch at most): how many batches came out empty."""
    chances = np.array([1.0] * 8 + [0.5] * 2)
    tasks = [{"split": "train", "index": k} for k in range(10)]
    sampler = CurriculumSampler(tasks, group_size=8, seed=seed)
    policy = policy_winning(chances, seed)
    empty = 0
    for _ in range(batches):
        kept = asyncio.run(play(url, sampler, policy, 8, 8, gates=[ZeroSignalGate()]))
        empty += not kept
    return {"batches": batches, "empty": empty, "sampler": sampler.metrics()}


def overhead(tasks: int, draws: int = 64, rounds: int = 30) -> dict:
    """Microseconds of the sampler's own work per sampled task (sample and update) at `tasks` tasks."""
    catalog_ = [{"split": "train", "index": k} for k in range(tasks)]
    out = {}
    for name, make in (("uniform", UniformSampler), ("curriculum", CurriculumSampler),
                       ("pools", DifficultyPoolSampler)):
        sampler = make(catalog_, group_size=8, seed=0)
        started = time.perf_counter()
        for _ in range(rounds):
            for task in sampler.sample(draws):
                sampler.update(task, [1, 0, 0, 1, 0, 0, 0, 1])
        out[name] = round((time.perf_counter() - started) / (rounds * draws) * 1e6, 1)
    return out


def over_the_wire(tasks: int = 100_000, draws: int = 64, rounds: int = 300) -> dict:
    """Milliseconds per `sample(draws)` and per `update` of a curriculum held by a server (ServerSampler) and of
    the same one in this process, at `tasks` tasks; what the wire adds is the difference."""
    local = CurriculumSampler([{"split": "train", "index": k} for k in range(tasks)], group_size=8, seed=0)
    with _environ(COIN_TASKS=str(tasks)), LocalServer(str(COIN), 2, 1000, "--sampler", "curriculum",
                                                        "--group-size", "8", "--sampler-seed", "0") as server:
        shared = ServerSampler(server.url)
        timings = {}
        for where, sampler in (("local", local), ("server", shared)):
            sampler.sample(draws)  # (warm: the connection open)
            started = time.perf_counter()
            for _ in range(rounds):
                drawn = sampler.sample(draws)
            sampled = time.perf_counter() - started
            started = time.perf_counter()
            for task in drawn * (rounds // draws + 1):
                sampler.update(task, [1, 0, 0, 1, 0, 0, 0, 1])
            updated = time.perf_counter() - started
            timings[where] = (sampled / rounds * 1e3, updated / (len(drawn) * (rounds // draws + 1)) * 1e3)
        shared.close()
    (local_sample, local_update), (wire_sample, wire_update) = timings["local"], timings["server"]
    return {"tasks": tasks, f"sample_{draws}_ms": {"local": round(local_sample, 3), "server": round(wire_sample, 3),
                                                   "added": round(wire_sample - local_sample, 3)},
            "update_ms": {"local": round(local_update, 3), "server": round(wire_update, 3),
                          "added": round(wire_update - local_update, 3)}}


@contextlib.contextmanager
def _environ(**values: str):
    import os

    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--groups", type=int, default=2500)
    parser.add_argument("--batches", type=int, default=10_000, help="gated batches of the small catalog")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--wire-rounds", type=int, default=300, help="samples of 64 timed over the wire")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "samplers.json")
    args = parser.parse_args(argv)
    chances = np.random.default_rng(args.seed).beta(0.5, 0.5, 200)
    samplers = {"uniform": lambda t, s: UniformSampler(t, group_size=8, seed=s),
                "curriculum (defaults)": lambda t, s: CurriculumSampler(t, group_size=8, seed=s),
                "curriculum (RFC 013's exact weights, power=1)":
                    lambda t, s: CurriculumSampler(t, group_size=8, seed=s, power=1),
                "difficulty pools": lambda t, s: DifficultyPoolSampler(t, group_size=8, seed=s)}
    with LocalServer(str(COIN), 1, 1000) as server:
        tasks = catalog(server.url)
        signal = {name: signal_per_thousand(server.url, tasks, make, chances, args.groups, args.seed)
                  for name, make in samplers.items()}
        gated = empty_batches(server.url, args.batches, args.seed)
    uniform = signal["uniform"]["signal_groups_per_1000_episodes"]
    result = {"signal": {name: {"per_1000_episodes": round(row["signal_groups_per_1000_episodes"], 1),
                                "vs_uniform": round(row["signal_groups_per_1000_episodes"] / uniform, 2)}
                         for name, row in signal.items()},
              "gated": gated, "overhead_us_per_task_at_100000": overhead(100_000),
              "over_the_wire": over_the_wire(rounds=args.wire_rounds)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    for name, row in result["signal"].items():
        print(f"{name:48} {row['per_1000_episodes']:7.1f} signal groups / 1,000 episodes  {row['vs_uniform']:.2f}x")
    print(f"zero-signal gate: {gated['empty']} empty of {gated['batches']} batches "
          f"({gated['sampler']['groups_dropped']} groups dropped, {gated['sampler']['groups_short']} short)")
    print(f"sampler work per sampled task at 100,000 tasks (µs): {result['overhead_us_per_task_at_100000']}")
    wire = result["over_the_wire"]
    print(f"a server's sampler at 100,000 tasks: sample of 64 {wire['sample_64_ms']['server']} ms (local "
          f"{wire['sample_64_ms']['local']}, the wire adds {wire['sample_64_ms']['added']}), update "
          f"{wire['update_ms']['server']} ms (adds {wire['update_ms']['added']})")
    return result


if __name__ == "__main__":
    main()

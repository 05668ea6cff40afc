"""GRPO groups in the rollout stream: what grouping costs. The shipped `guess` env played by an instant scripted
policy (bisection over the conversation's hints) through `openenv_gym.rollouts`, with `group_size=G` and without,
the same sessions, the same number of episodes, one local server, in the same run; env steps/s of each.

    python -m benchmarks.groups [--sessions 1024] [--group-size 8] [--episodes 8192] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import time

import openenv_gym
from benchmarks.guessing_policy import bisect_policy
from benchmarks.measures import alternating, save_result
from openenv_gym.client.local import LocalServer


async def play(url: str, sessions: int, episodes: int, group_size: int | None) -> dict:
    """Steps/s of `episodes` episodes (with groups: episodes / group_size groups)."""
    grouped = {} if group_size is None else {"group_size": group_size}
    count = episodes if group_size is None else episodes // group_size
    steps = played = 0
    started = time.perf_counter()
    stream = openenv_gym.rollouts("openenv/guess", bisect_policy, base_url=url, num_envs=sessions, episodes=count,
                                  seed=0, **grouped)
    async with contextlib.aclosing(stream):
        async for finished in stream:
            for episode in finished.episodes if group_size else [finished]:
                steps += episode.steps
                played += 1
    seconds = time.perf_counter() - started
    return {"episodes": played, "steps": steps, "seconds": seconds, "steps_per_s": steps / seconds}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=1024)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--episodes", type=int, default=8192)
    parser.add_argument("--rounds", type=int, default=3, help="alternating runs of each, the median reported")
    args = parser.parse_args(argv)
    with LocalServer("guess", 1, args.sessions + 100) as server:
        runs, median = alternating(
            args.rounds, plain=lambda: asyncio.run(play(server.url, args.sessions, args.episodes, None)),
            groups=lambda: asyncio.run(play(server.url, args.sessions, args.episodes, args.group_size)))
    result = {"sessions": args.sessions, "group_size": args.group_size, "episodes": args.episodes, "runs": runs,
              "steps_per_s": median, "ratio": median["groups"] / median["plain"]}
    print(f"guess, {args.sessions:,} sessions, {args.episodes:,} episodes, scripted instant policy, one worker "
          f"(median of {args.rounds}):")
    print(f"  without groups:       {median['plain']:>10,.0f} steps/s")
    print(f"  groups of {args.group_size}:          {median['groups']:>10,.0f} steps/s")
    print(f"  groups / without: {result['ratio']:.2f}x")
    save_result("groups", result)
    return result


if __name__ == "__main__":
    main()

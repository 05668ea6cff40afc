"""GRPO groups in the rollout stream: what grouping costs. The shipped `guess` env played by an instant scripted
policy (bisection over the conversation's hints) through `openenv_gym.rollouts`, with `group_size=G` and without,
the same sessions, the same number of episodes, one local server, in the same run; env steps/s of each.

    python -m benchmarks.groups [--sessions 1024] [--group-size 8] [--episodes 8192] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import re
import statistics
import time

import openenv_gym
from benchmarks.measures import save_result
from openenv_gym.client.local import LocalServer

HINT = re.compile(r"(higher|lower) than (\d+)")


async def bisect(messages: list[dict], tools: list[dict]) -> str:
    """Guess the middle of what the hints so far leave open (instant: no model)."""
    low, high = 1, 100
    for message in messages:
        for direction, number in HINT.findall(message.get("content") or ""):
            if direction == "higher":
                low = max(low, int(number) + 1)
            else:
                high = min(high, int(number) - 1)
    return f'<tool_call>{{"name": "guess", "arguments": {{"number": {(low + high) // 2}}}}}</tool_call>'


async def play(url: str, sessions: int, episodes: int, group_size: int | None) -> dict:
    """Steps/s of `episodes` episodes (with groups: episodes / group_size groups)."""
    grouped = {} if group_size is None else {"group_size": group_size}
    count = episodes if group_size is None else episodes // group_size
    steps = played = 0
    started = time.perf_counter()
    stream = openenv_gym.rollouts("openenv/guess", bisect, base_url=url, num_envs=sessions, episodes=count, seed=0,
                                  **grouped)
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
    runs: dict[str, list[dict]] = {"plain": [], "groups": []}
    with LocalServer("guess", 1, args.sessions + 100) as server:
        for _ in range(args.rounds):  # alternating, so that the machine's noise falls on both
            runs["plain"].append(asyncio.run(play(server.url, args.sessions, args.episodes, None)))
            runs["groups"].append(asyncio.run(play(server.url, args.sessions, args.episodes, args.group_size)))
    median = {kind: statistics.median(r["steps_per_s"] for r in results) for kind, results in runs.items()}
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

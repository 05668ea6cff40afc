"""openreward's side of the ORS comparison, run with a python that has openreward (the env's venv).

    python openreward_peer.py URL ENV --sessions 1000 --rounds 3

Drives an openreward Server at URL with the SDK's own AsyncOpenReward client: `sessions` concurrent
players, each playing `rounds` episodes back to back (session, tool calls until finished, close).
Prints one JSON line.

    python openreward_peer.py URL ENV --plays '[[{"split": "train", "index": 1}, [{"name": "answer", ...}]], ...]'

The oracle of an episode's reward instead: each play's task (the session's arguments) and tool calls, made in turn
with the same client until the episode is finished; prints the list of their rewards' sums.
"""

import argparse
import asyncio
import json
import os

from benchmarks.episodes import Tally


def environment(url: str, env_name: str):
    os.environ["OPENREWARD_API_URL"] = os.environ["OPENREWARD_SESSION_URL"] = url  # one host, no platform
    from openreward import AsyncOpenReward

    return AsyncOpenReward().environments.get(env_name, base_url=url)


async def rewards(url: str, env_name: str, plays: list) -> list[float]:
    """Each play's reward: its tool calls' rewards summed, up to the one that finished the episode."""
    env, totals = environment(url, env_name), []
    for task, calls in plays:
        total = 0.0
        async with env.session(**task) as session:
            for call in calls:
                result = await session.call_tool(call["name"], call["arguments"])
                total += result.reward or 0.0
                if result.finished:
                    break
        totals.append(total)
    return totals


async def main(url: str, env_name: str, sessions: int, rounds: int) -> dict:
    env = environment(url, env_name)

    async def play(index: int) -> None:
        for _ in range(rounds):
            try:
                async with env.session(split="train", index=index % 100) as session:
                    while not (await session.call_tool("increment", {})).finished:
                        tally.steps += 1
                    tally.steps += 1
            except Exception:
                tally.errors += 1

    tally = Tally()
    await asyncio.gather(*(play(i) for i in range(sessions)))
    return tally.figures()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("env")
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--plays", type=json.loads, default=None, help="instead: these episodes' rewards")
    args = parser.parse_args()
    if args.plays is not None:
        print(json.dumps(asyncio.run(rewards(args.url, args.env, args.plays))), flush=True)
        raise SystemExit
    print(json.dumps(asyncio.run(main(args.url, args.env, args.sessions, args.rounds))), flush=True)

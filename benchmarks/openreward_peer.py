"""openreward's side of the ORS comparison, run with a python that has openreward (the env's venv).

    python openreward_peer.py URL ENV --sessions 1000 --rounds 3

Drives an openreward Server at URL with the SDK's own AsyncOpenReward client: `sessions` concurrent
players, each playing `rounds` episodes back to back (session, tool calls until finished, close).
Prints one JSON line.
"""

import argparse
import asyncio
import json
import os

from benchmarks.episodes import Tally


async def main(url: str, env_name: str, sessions: int, rounds: int) -> dict:
    os.environ["OPENREWARD_API_URL"] = os.environ["OPENREWARD_SESSION_URL"] = url  # one host, no platform
    from openreward import AsyncOpenReward

    client = AsyncOpenReward()
    env = client.environments.get(env_name, base_url=url)

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
    args = parser.parse_args()
    print(json.dumps(asyncio.run(main(args.url, args.env, args.sessions, args.rounds))), flush=True)

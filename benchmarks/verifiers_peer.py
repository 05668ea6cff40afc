"""Verifiers' side of the Verifiers comparison: the environment run in process by verifiers itself, with an
instant scripted model client. Run with a python that has verifiers (the environment's venv):

    python verifiers_peer.py SOURCE.py --sessions 500 --rounds 3

`sessions` concurrent players on one event loop, each running `rounds` episodes (`env.run_rollout`)
one after the other; steps/s = model turns / wall time (rollout setup and scoring included). Prints one
JSON line.
"""

import argparse
import asyncio
import importlib.util
import json
from pathlib import Path

import verifiers as vf

from benchmarks.episodes import Tally
from benchmarks.guessing_policy import bisect_guess
from openenv_gym.adapters.verifiers.classic_rollout import callback_client_class


async def scripted_model(prompt: list) -> dict:
    """A model that answers at once with the scripted policy's reply to the last message."""
    return {"content": bisect_guess(prompt[-1]["content"]), "tool_calls": []}


def load_environment(source: Path):
    spec = importlib.util.spec_from_file_location(source.stem, source)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.load_environment()


async def main(source: Path, sessions: int, rounds: int) -> dict:
    env = load_environment(source)
    dataset = env.get_dataset()
    client = callback_client_class(vf)(scripted_model)

    async def play(index: int) -> None:
        """`rounds` episodes of row index mod len(dataset), one after the other."""
        row = dict(dataset[index % len(dataset)])
        for _ in range(rounds):
            output = await env.run_rollout(row, client, "scripted", {})
            tally.steps += int(output["metrics"]["num_turns"])
            tally.errors += output["error"] is not None

    tally = Tally()
    await asyncio.gather(*(play(index) for index in range(sessions)))
    return tally.figures()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("source", type=Path)
    parser.add_argument("--sessions", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(main(args.source, args.sessions, args.rounds))), flush=True)

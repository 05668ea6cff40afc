"""Verifiers' side of the Verifiers comparison: the environment run in process by verifiers itself, with an
instant scripted model client. Run with a python that has verifiers (the environment's venv):

    python verifiers_peer.py SOURCE.py --sessions 500 --rounds 3
    python verifiers_peer.py SOURCE.py --sessions 500 --rounds 3 --group-size 4 --env-args '{"group_reward": true}'

`sessions` concurrent players on one event loop, each running `rounds` episodes (`env.run_rollout`)
one after the other; steps/s = model turns / wall time (rollout setup and scoring included). With
`--group-size G`: verifiers' own `generate` over `sessions * rounds / G` rows, each G times, as it runs GRPO
groups (`run_group`: G rollouts, then the rubric's `score_group`), `sessions / G` groups at once. Prints one
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


def load_environment(source: Path, env_args: dict):
    spec = importlib.util.spec_from_file_location(source.stem, source)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.load_environment(**env_args)


async def groups(env, sessions: int, rounds: int, size: int) -> dict:
    """verifiers' generate() over G copies of each row: one run_group per row, sessions / G at once."""
    dataset = env.get_dataset()
    rows = [dict(dataset[index % len(dataset)], example_id=index) for index in range(sessions * rounds // size)]
    client = callback_client_class(vf)(scripted_model)
    tally = Tally()
    results = await env.generate([row for row in rows for _ in range(size)], client, "scripted",
                                 max_concurrent=sessions // size, on_progress=lambda *a: None)
    for output in results["outputs"]:
        tally.steps += int(output["metrics"]["num_turns"])
        tally.errors += output["error"] is not None
    return tally.figures()


async def main(source: Path, sessions: int, rounds: int, env_args: dict, group_size: int | None) -> dict:
    env = load_environment(source, env_args)
    if group_size is not None:
        return await groups(env, sessions, rounds, group_size)
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
    parser.add_argument("--env-args", type=json.loads, default={})
    parser.add_argument("--group-size", type=int)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(main(args.source, args.sessions, args.rounds, args.env_args, args.group_size))),
          flush=True)

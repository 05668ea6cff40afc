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
import time
from pathlib import Path

from verifiers import Client, Response, ResponseMessage  # once: each vf.X access re-imports

from openenv_gym.bench.guessing_policy import bisect_guess


class ScriptedClient(Client):
    """A model that answers at once with the scripted policy's reply to the last message."""

    def setup_client(self, config):
        return None

    async def to_native_tool(self, tool):
        return tool

    async def to_native_prompt(self, messages):
        return messages, {}

    async def get_native_response(self, prompt, model, sampling_args, tools=None, **kwargs):
        return bisect_guess(prompt[-1]["content"])

    async def raise_from_native_response(self, response):
        return None

    async def from_native_response(self, text):
        message = ResponseMessage(content=text, finish_reason="stop", is_truncated=False)
        return Response(id="scripted", created=int(time.time()), model="scripted", message=message)

    async def close(self):
        return None


def load_environment(source: Path):
    spec = importlib.util.spec_from_file_location(source.stem, source)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.load_environment()


async def main(source: Path, sessions: int, rounds: int) -> dict:
    env = load_environment(source)
    dataset = env.get_dataset()
    client = ScriptedClient(None)
    steps = errors = 0

    async def play(index: int) -> None:
        """`rounds` episodes of row index mod len(dataset), one after the other."""
        nonlocal steps, errors
        row = dict(dataset[index % len(dataset)])
        for _ in range(rounds):
            output = await env.run_rollout(row, client, "scripted", {})
            steps += int(output["metrics"]["num_turns"])
            errors += output["error"] is not None

    started = time.perf_counter()
    await asyncio.gather(*(play(index) for index in range(sessions)))
    elapsed = time.perf_counter() - started
    return {"steps": steps, "seconds": elapsed, "steps_per_s": steps / elapsed, "errors": errors}


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("source", type=Path)
    parser.add_argument("--sessions", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(main(args.source, args.sessions, args.rounds))), flush=True)

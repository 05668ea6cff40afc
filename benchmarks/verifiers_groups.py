"""GRPO groups of a Verifiers environment whose rubric has a group reward function, through openenv_gym against
verifiers' own `generate`, in the same run.

The multi-turn guessing game (benchmarks/envs/vf_guessing, load_environment(group_reward=True): its rubric adds
`fewest_guesses(states)`, scored over the group) with an instant scripted policy (bisection). Both sides play
`sessions * rounds / G` rows G times each, `sessions` players at once, every group scored by the rubric's own
`score_group`. Ours: the environment imported with `openenv-gym import`, served by `--workers` workers in its own
venv, played through `openenv_gym.rollouts(..., group_size=G)` (the server scores each group). Theirs:
`env.generate` over the rows repeated G times (one `run_group` per row: G rollouts gathered, then
`score_group`), `sessions / G` groups at once, on one event loop, with the same scripted client
(verifiers_peer.py --group-size). steps/s = model turns / wall time.

    python -m benchmarks.verifiers_groups [--sessions 500] [--rounds 3] [--group-size 4] [--workers 2]
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time

import openenv_gym
from benchmarks.episodes import ENVS, comparison_arguments, imported_server, report, run_peer
from benchmarks.guessing_policy import bisect_guess

ROWS = 50  # the game's default dataset size
ENV_ARGS = {"group_reward": True}


async def ours(url: str, sessions: int, groups: int, size: int) -> dict:
    async def policy(messages: list[dict], tools: list[dict]) -> str:
        return bisect_guess(messages[-1]["content"])

    steps = errors = scored = 0
    started = time.perf_counter()
    stream = openenv_gym.rollouts("openenv/verifiers-bench-groups", policy, base_url=url, num_envs=sessions,
                                  tasks=({"split": "train", "index": k % ROWS} for k in range(groups)),
                                  group_size=size, env_args=ENV_ARGS, request_timeout=600)
    async with contextlib.aclosing(stream):
        async for group in stream:
            for episode in group.episodes:
                steps += episode.steps
                errors += episode.error is not None
                scored += episode.group_reward is not None
    seconds = time.perf_counter() - started
    if scored != groups * size:
        raise SystemExit(f"{groups * size - scored} episodes came without a group reward")
    return {"steps": steps, "seconds": seconds, "steps_per_s": steps / seconds, "errors": errors}


def main(argv: list[str] | None = None) -> dict:
    args = comparison_arguments(argv, __doc__, sessions=500, group_size=4)
    groups = args.sessions * args.rounds // args.group_size
    serve_args = ("--env-args", json.dumps(ENV_ARGS))
    with imported_server(ENVS / "vf_guessing", "bench-groups", args.workers, args.sessions + 100,
                         serve_args) as served:
        openenv_gym.register_all()  # the scratch home's import: openenv/verifiers-bench-groups
        mine = asyncio.run(ours(served.url, args.sessions, groups, args.group_size))
        theirs = run_peer(served.python, "benchmarks.verifiers_peer", str(served.folder / "vendor" / "guessing.py"),
                          "--sessions", str(args.sessions), "--rounds", str(args.rounds), "--group-size",
                          str(args.group_size), "--env-args", json.dumps(ENV_ARGS))
    theirs_row = ("verifiers_generate", "verifiers' own generate (run_group per row, one event loop)", theirs)
    return report(args, f"Verifiers group rubric, groups of {args.group_size}", mine, theirs_row,
                  "verifiers_groups.json")


if __name__ == "__main__":
    main()

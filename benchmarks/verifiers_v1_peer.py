"""Verifiers' own way of running v1 episodes (the other side of the v1 comparison, and the tests' oracle). Run
with the environment's venv python, from the repository root:

    python -m benchmarks.verifiers_v1_peer PROJECT TASKSET_ID --sessions 64 --rounds 2    # throughput, one JSON line
    python -m benchmarks.verifiers_v1_peer PROJECT TASKSET_ID --task 0 --replies 50 25  # one episode, as JSON
    python -m benchmarks.verifiers_v1_peer PROJECT TASKSET_ID --task 0 --best-of 3 --replies a b c  # best-of-n
    python -m benchmarks.verifiers_v1_peer PROJECT TASKSET_ID --task 0 --config '{"n": 2, "taskset": {"k": 1}}' ...
    (--config: the env's config as Verifiers' command line nests it: --env.n 2 --env.taskset.k 1)
    (a reply that is a JSON object is a message or a tool call, as a step's action)

The project's package is loaded as Verifiers' loader loads it (its folder on sys.path); each episode is
`env.run_episode` inside `env.serving()`, as Verifiers' eval runner runs it, with the null harness in
Verifiers' own subprocess runtime (each program started through uv, as Verifiers starts it). The model is a
scripted OpenAI-compatible endpoint on loopback that answers at once: with the given replies in turn, or, for
throughput, with the last word of the last message (the word_echo taskset's answer).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import verifiers.v1 as vf
from verifiers.v1.utils.loaders import load_environment, resolve_env_config

from benchmarks.episodes import Tally
from openenv_gym.episode.assistant import assistant_message
from openenv_gym.server.model_endpoint import ModelEndpointServer

KEY_VARIABLE = "VERIFIERS_PEER_KEY"


def verifiers_env(project: str, taskset_id: str, best_of: int | None = None, config: dict | None = None) -> Any:
    """The env as Verifiers loads it, every agent on the null harness (unless it names one) and the local
    subprocess runtime; with `best_of`, Verifiers' best-of-n env over the taskset (n attempts, one at a time); with
    `config`, the env's config, nested as Verifiers' own command line nests it."""
    return load_environment(verifiers_config(project, taskset_id, best_of, config))


def verifiers_config(project: str, taskset_id: str, best_of: int | None = None, config: dict | None = None) -> Any:
    """The env config of verifiers_env(): the project importable here and in the programs it starts."""
    sys.path.insert(0, project)  # as if installed: here, and in the tool servers it starts (python -m ...)
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [project, os.environ.get("PYTHONPATH")]))
    given = dict(config or {})
    chosen = {} if best_of is None else {"id": "best-of-n", "n": best_of}
    config = resolve_env_config({**given, **chosen, "taskset": {**given.get("taskset", {}), "id": taskset_id}})
    pinned = {name: agent.model_copy(update={"runtime": vf.SubprocessConfig(),
                                             "harness": agent.harness or {"id": "null"}}).model_dump()
              for name, agent in config if isinstance(agent, vf.AgentConfig)}
    return resolve_env_config({**config.model_dump(), **pinned})


async def episode(env: Any, task: Any, model: Callable[[Any], Awaitable[dict]], endpoint: ModelEndpointServer) -> Any:
    lease = await endpoint.open(model, "policy")
    try:
        context = vf.ModelContext(model="policy", client=vf.EvalClientConfig(base_url=lease.base_url,
                                                                            api_key_var=KEY_VARIABLE))
        return await env.run_episode(task, context)
    finally:
        lease.close()


def reply_of(text: str) -> Any:
    """A reply given on the command line: a JSON object is a message or a tool call, anything else is text."""
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return value if isinstance(value, dict) else text


async def one_episode(env: Any, index: int, replies: list[str]) -> dict:
    """One episode of task `index` with these replies: what it scored and what the model was asked."""
    asked, answers = [], iter(replies)

    async def model(request: Any) -> dict:
        asked.append(request.messages)
        return assistant_message(reply_of(next(answers)), set(), len(asked))

    async with env.serving():
        task = next(itertools.islice(env.taskset, index, None))  # read no further: a taskset may never end
        played = await episode(env, task, model, ModelEndpointServer())
    traces = [{"reward": trace.reward, "rewards": {k: r.score for k, r in trace.rewards.items()},
               "metrics": dict(trace.metrics), "stop_condition": trace.stop_condition} for trace in played.traces]
    return {**traces[0], "ok": played.ok, "asked": asked, "traces": traces}


async def throughput(env: Any, sessions: int, rounds: int) -> dict:
    """`sessions` concurrent players, each playing `rounds` episodes back to back (player i plays task i mod n)."""
    tasks = list(env.taskset)

    async def model(request: Any) -> dict:
        return {"content": request.last_text.split()[-1], "tool_calls": []}

    endpoint = ModelEndpointServer()
    async with env.serving():
        await episode(env, tasks[0], model, endpoint)  # the harness script's environment, prepared once

        async def play(player: int) -> None:
            for _ in range(rounds):
                played = await episode(env, tasks[player % len(tasks)], model, endpoint)
                tally.steps += played.num_turns
                tally.errors += not played.ok

        tally = Tally()
        await asyncio.gather(*(play(player) for player in range(sessions)))
        return tally.figures()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("project")
    parser.add_argument("taskset_id")
    parser.add_argument("--sessions", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--task", type=int, help="play this one task with --replies, and print what it scored")
    parser.add_argument("--replies", nargs="*", default=[])
    parser.add_argument("--best-of", type=int, help="with --task: Verifiers' best-of-n env, n attempts")
    parser.add_argument("--config", type=json.loads, default={}, help="the env's config, as JSON")
    args = parser.parse_args()
    os.environ.setdefault(KEY_VARIABLE, "unused")
    os.environ["PATH"] = f"{os.path.dirname(sys.executable)}{os.pathsep}{os.environ['PATH']}"  # its own uv
    env = verifiers_env(args.project, args.taskset_id, args.best_of, args.config)
    if args.task is not None:
        result = asyncio.run(one_episode(env, args.task, args.replies))
    else:
        result = asyncio.run(throughput(env, args.sessions, args.rounds))
    print(json.dumps(result), flush=True)

"""Verifiers' own env-server client (verifiers 0.4's `EnvClient`, what prime-rl's orchestrator calls) driving a
server: the tests' and benchmarks' view of a Verifiers front end. Run with a python that has verifiers 0.4, from the
repository root:

    python -m benchmarks.verifiers_client tcp://127.0.0.1:5000 --model-url http://127.0.0.1:9000/v1 --model m \
        --tasks '[{"seed": 1}, {"options": {"split": "train", "index": 0}}]'          # the runs, as one JSON line
    ... --model right wrong     # a model per run, in turn: the first run's, the second's, ...
    ... --cancel-after 0.5      # cancel every run after 0.5 s (EnvClient sends the server its cancel)
    ... --taskset PROJECT TASKSET_ID --indices 0 3     # task_data of a v1 taskset's tasks, dumped as prime-rl does
                                                       # (then those of --tasks, if given too)
    ... --runs 1024 --concurrency 64     # throughput: runs of the tasks in turn, 64 at a time; one JSON line of figures

Each run is `EnvClient.run(EvalClientConfig(base_url), model, SamplingConfig(), task_data)`, all at once; its line
holds, per run, the episode as the client validated it (its ok, errors, and per trace: the reward, the rewards by
name, metrics, stop condition, messages and number of model calls), or the error the server replied with.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

from verifiers.v1.configs.client import EvalClientConfig
from verifiers.v1.dialects.chat import message_to_wire
from verifiers.v1.serve.client import EnvClient
from verifiers.v1.types import SamplingConfig


def episode_summary(episode: Any) -> dict[str, Any]:
    return {"ok": episode.ok, "errors": [f"{e.type}: {e.message}" for e in episode.errors],
            "traces": [{"agent": trace.agent.name if trace.agent else None,
                        "trainable": trace.agent.trainable if trace.agent else None,
                        "reward": trace.reward, "rewards": {n: r.score for n, r in trace.rewards.items() if r},
                        "metrics": dict(trace.metrics), "info": dict(trace.info),
                        "stop_condition": trace.stop_condition, "ok": trace.ok,
                        "messages": [message_to_wire(m) for m in trace.messages], "calls": len(trace.calls),
                        "errors": [f"{e.type}: {e.message}" for e in trace.errors]}
                       for trace in episode.traces]}


async def runs(address: str, model_url: str, models: list[str], tasks: list[dict[str, Any]],
               cancel_after: float | None = None) -> list[dict[str, Any]]:
    """Each task's run, all at once, each with the next of `models` in turn."""
    client = EnvClient(address)
    try:
        await client.wait_for_server_startup(timeout=60)
        calls = [asyncio.ensure_future(client.run(EvalClientConfig(base_url=model_url), models[number % len(models)],
                                                  SamplingConfig(), task)) for number, task in enumerate(tasks)]
        if cancel_after is not None:
            await asyncio.sleep(cancel_after)
            for call in calls:
                call.cancel()
        answers = await asyncio.gather(*calls, return_exceptions=True)
        healthy = await client.health()
    finally:
        await client.close()
    return [{"cancelled": True} if isinstance(answer, asyncio.CancelledError) else
            {"error": str(answer)} if isinstance(answer, BaseException) else episode_summary(answer)
            for answer in answers] + [{"healthy_after": healthy}]


async def throughput(address: str, model_url: str, model: str, tasks: list[dict[str, Any]], runs: int,
                     concurrency: int) -> dict[str, Any]:
    """`runs` runs of the tasks in turn, `concurrency` at a time: runs/s, errors (a reply with success false, or an
    episode not ok) and their first reasons."""
    client = EnvClient(address)
    await client.wait_for_server_startup(timeout=120)
    inference, sampling = EvalClientConfig(base_url=model_url), SamplingConfig()
    numbers, errors, reasons = iter(range(runs)), 0, []

    async def player() -> None:
        nonlocal errors
        for number in numbers:
            try:
                episode = await client.run(inference, model, sampling, tasks[number % len(tasks)])
                failed = [f"{e.type}: {e.message}" for e in episode.errors] if not episode.ok else []
            except RuntimeError as exc:
                failed = [str(exc)]
            if failed:
                errors += 1
                reasons.extend(failed[:1] if len(reasons) < 5 else [])

    started = time.perf_counter()
    try:
        await asyncio.gather(*(player() for _ in range(concurrency)))
    finally:
        seconds = time.perf_counter() - started
        await client.close()
    return {"runs": runs, "concurrency": concurrency, "seconds": seconds, "runs_per_s": runs / seconds,
            "errors": errors, "reasons": reasons}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("address")
    parser.add_argument("--model-url", required=True)
    parser.add_argument("--model", required=True, nargs="+", help="a model per run, in turn")
    parser.add_argument("--tasks", type=json.loads, help="a JSON list of task_data")
    parser.add_argument("--taskset", nargs=2, metavar=("PROJECT", "TASKSET_ID"),
                        help="the tasks of this v1 taskset (--indices), loaded here as prime-rl loads them, first")
    parser.add_argument("--indices", type=int, nargs="*", default=[0])
    parser.add_argument("--cancel-after", type=float, default=None)
    parser.add_argument("--runs", type=int, default=None, help="throughput: this many runs of the tasks in turn")
    parser.add_argument("--concurrency", type=int, default=64, help="throughput: runs at once")
    args = parser.parse_args()
    tasks = (taskset_data(*args.taskset, args.indices) if args.taskset else []) + (args.tasks or [])
    if args.runs is not None:
        print(json.dumps(asyncio.run(throughput(args.address, args.model_url, args.model[0], tasks, args.runs,
                                                args.concurrency))))
        return
    print(json.dumps(asyncio.run(runs(args.address, args.model_url, args.model, tasks, args.cancel_after))))


def taskset_data(project: str, taskset_id: str, indices: list[int]) -> list[dict[str, Any]]:
    """What prime-rl's orchestrator sends as task_data: the taskset loaded on its side (vf.load_taskset), each
    task's data dumped."""
    import sys

    import verifiers.v1 as vf

    sys.path.insert(0, project)
    tasks = list(vf.load_taskset(vf.resolve_env_config({"taskset": {"id": taskset_id}}).taskset))
    return [tasks[index].data.model_dump(mode="json") for index in indices]


if __name__ == "__main__":
    main()

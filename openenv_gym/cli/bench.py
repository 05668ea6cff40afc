"""`openenv-gym bench ENV_ID`: the throughput of an environment as this machine serves it.

For each session count it makes `gym.make_vec(ENV_ID, num_envs=N)` (against a local server it starts, or
--env-url) and steps all sessions for a few seconds with actions sampled from the action space (or
--action), NEXT_STEP autoreset included. It prints steps/s, the p50/p99 latency of one vector step, and the
server's resident memory per session (for a local server: /proc of the server and its workers). Only
runtime dependencies; --plot needs matplotlib.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from openenv_gym.episode.results import INVALID_ACTION

ACTION_POOL = 256  # sampled actions, cycled: sampling every action every step would measure the sampler


@dataclass
class Row:
    sessions: int
    steps_per_s: float
    p50_ms: float
    p99_ms: float
    server_bytes_per_session: float | None
    errors: int


def add_bench(commands: argparse._SubParsersAction) -> None:
    from openenv_gym.cli import positive_int
    from openenv_gym.cli.renamed import add_json_flag, add_renamed

    bench = commands.add_parser("bench", help="steps/s, step latency and server memory of an environment",
                                description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    bench.add_argument("env_id", help="a gym id (openenv/echo, openenv/ors-myenv, ...) or an environment name")
    add_renamed(bench, "--base-url", bench.add_argument(
        "--env-url", nargs="+", help="running env servers to use, or one dns+ws://NAME:PORT for every address of NAME "
                                     "(default: start a local one)"))
    bench.add_argument("--env", help="the environment's name on the servers, for ids that drive any server "
                                     "(openenv/ors)")
    bench.add_argument("--num-envs", type=positive_int, nargs="+", default=[64, 1024],
                       help="session counts to measure (default 64 1024)")
    bench.add_argument("--workers", type=positive_int, default=os.cpu_count() or 1,
                       help="workers of the local server (default: one per core)")
    bench.add_argument("--seconds", type=float, default=3.0, help="time spent stepping at each count (default 3)")
    bench.add_argument("--action", help="the action of every step: JSON (a tool call) or plain text "
                                        "(default: samples of the action space)")
    bench.add_argument("--output", type=Path, help="also write the results to this JSON file")
    add_json_flag(bench, "print the results as JSON (one object per session count) instead of a table")
    bench.add_argument("--plot", type=Path, help="also plot steps/s against sessions to this PNG (needs matplotlib)")
    bench.set_defaults(run=run_bench)


def _actions(envs: Any, given: str | None) -> list[Any]:
    if given is not None:
        try:
            return [json.loads(given)]
        except json.JSONDecodeError:
            return [given]
    space = envs.single_action_space
    space.seed(0)
    return [space.sample() for _ in range(ACTION_POOL)]


def measure(env_id: str, sessions: int, base_url: list[str] | str, seconds: float, action: str | None,
            server_pid: int | None, env: str | None = None) -> Row:
    import gymnasium as gym

    from openenv_gym.cli.procinfo import tree_rss

    idle = tree_rss(server_pid) if server_pid else 0
    envs = gym.make_vec(env_id, num_envs=sessions, base_url=base_url, **({"env": env} if env else {}))
    try:
        envs.reset(seed=0)
        held = (tree_rss(server_pid) - idle) / sessions if server_pid else None
        pool = _actions(envs, action)
        batches = [[pool[(k + i) % len(pool)] for i in range(sessions)] for k in range(min(len(pool), 8))]
        latencies: list[float] = []
        errors = 0
        started = time.perf_counter()
        while len(latencies) < 5 or time.perf_counter() - started < seconds:
            step_started = time.perf_counter()
            *_, infos = envs.step(batches[len(latencies) % len(batches)])
            latencies.append(time.perf_counter() - step_started)
            errors += _failures(infos)
        elapsed = time.perf_counter() - started
    finally:
        envs.close()
    ms = np.asarray(latencies) * 1000
    return Row(sessions, sessions * len(latencies) / elapsed, float(np.percentile(ms, 50)),
               float(np.percentile(ms, 99)), held, errors)


def _failures(infos: dict[str, Any]) -> int:
    """Envs whose session failed this step (an invalid action is an observation, not a failure)."""
    error = infos.get("error")
    if error is None:
        return 0
    return sum(1 for code, present in zip(error["code"], error["_code"], strict=True)
               if present and code != INVALID_ACTION)


def _local_server(env_id: str, workers: int, sessions: int) -> Any:
    import gymnasium as gym

    from openenv_gym.client.local import LocalServer

    spec = gym.spec(env_id) if env_id.startswith("openenv/") else None
    env = (spec.kwargs or {}).get("env") if spec is not None else env_id
    if env is None:
        raise SystemExit(f"openenv-gym bench: {env_id} drives running servers; pass --env-url")
    return LocalServer(str(env), workers, sessions + 100)


def run_bench(args: argparse.Namespace) -> None:
    import openenv_gym  # noqa: F401  (registers the ids)

    env_id = args.env_id if args.env_id.startswith("openenv/") else _gym_id(args.env_id)
    server = None if args.env_url else _local_server(env_id, args.workers, max(args.num_envs))
    try:
        urls = args.env_url or server.url
        rows = [measure(env_id, n, urls, args.seconds, args.action, server.process.pid if server else None, args.env)
                for n in tqdm(args.num_envs, desc="bench", unit="size", leave=False)]
    finally:
        if server is not None:
            server.stop()
    if args.output:
        args.output.write_text(json.dumps([asdict(row) for row in rows], indent=2))
    if args.json:
        print(json.dumps([asdict(row) for row in rows]))
    else:
        _print_table(env_id, rows, ", ".join(args.env_url) if args.env_url else
                     f"a local server with {args.workers} workers")
    if args.plot:
        plot(rows, env_id, args.plot)


def _print_table(env_id: str, rows: list[Row], where: str) -> None:
    print(f"{env_id} on {where}:")
    print(f"{'sessions':>9} {'steps/s':>12} {'p50 ms':>9} {'p99 ms':>9} {'server bytes/session':>21} {'errors':>7}")
    for row in rows:
        held = "n/a (remote)" if row.server_bytes_per_session is None else f"{row.server_bytes_per_session:,.0f}"
        print(f"{row.sessions:>9,} {row.steps_per_s:>12,.0f} {row.p50_ms:>9.2f} {row.p99_ms:>9.2f} {held:>21} "
              f"{row.errors:>7}")


def _gym_id(name: str) -> str:
    from openenv_gym.manifests import find_manifest

    return find_manifest(name).gym_id


def plot(rows: list[Row], env_id: str, path: Path) -> None:
    try:
        import matplotlib
    except ImportError:
        raise SystemExit("openenv-gym bench: --plot needs matplotlib (pip install matplotlib); "
                         "the figures above are complete without it") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot([r.sessions for r in rows], [r.steps_per_s for r in rows], marker="o")
    ax.set_xscale("log")
    ax.set_xlabel("concurrent sessions")
    ax.set_ylabel("steps / s")
    ax.set_title(env_id)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"plot in {path}")

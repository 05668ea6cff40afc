"""Throughput of echo at several session counts, measured side by side in one run:

- ours: gym.make_vec("openenv/echo", num_envs=N) against `openenv-gym serve echo` (one worker per core);
- OpenEnv 0.10.0 in its own venv, its own server and client, a trivial echo env with concurrent
  sessions: the template set-up (sync env, one uvicorn worker) and a tuned one (async env, one worker
  per core);
- the wire limit: batched websockets + orjson ping-pong with no environment and no session logic.

Prints a table with ratios, saves results JSON and a PNG plot.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import orjson
from tqdm import tqdm

HERE = Path(__file__).parent
OPENENV_VERSION = "0.10.0"
DEFAULT_SIZES = (64, 1024, 10_000)


@dataclass
class Row:
    system: str
    sessions: int
    steps_per_s: float
    p50_ms: float
    p99_ms: float
    rss_per_session: float | None = None  # server bytes per session
    errors: int = 0


def _timed_steps(step, budget_s: float, min_steps: int = 5) -> tuple[list[float], float]:
    """Call step() repeatedly for about budget_s seconds; return each call's latency and the total."""
    latencies: list[float] = []
    started = time.perf_counter()
    while len(latencies) < min_steps or time.perf_counter() - started < budget_s:
        t = time.perf_counter()
        step()
        latencies.append(time.perf_counter() - t)
    return latencies, time.perf_counter() - started


def _percentiles_ms(latencies: list[float]) -> tuple[float, float]:
    ms = np.asarray(latencies) * 1000
    return float(np.percentile(ms, 50)), float(np.percentile(ms, 99))


def measure_ours(sessions: int, workers: int, budget_s: float, connections_per_worker: int) -> Row:
    import gymnasium as gym

    import openenv_gym  # noqa: F401  (registers openenv/echo)
    from openenv_gym.cli.procinfo import tree_rss
    from openenv_gym.client.local import LocalServer

    server = LocalServer("echo", workers, sessions + 100)
    try:
        idle = tree_rss(server.process.pid)
        envs = gym.make_vec("openenv/echo", num_envs=sessions, base_url=server.url, options={"max_steps": 10**9},
                            connections_per_worker=connections_per_worker)
        envs.reset(seed=0)
        rss = tree_rss(server.process.pid)
        actions = ["hi"] * sessions
        for _ in range(3):
            envs.step(actions)
        latencies, elapsed = _timed_steps(lambda: envs.step(actions), budget_s)
        envs.close()
    finally:
        server.stop()
    p50, p99 = _percentiles_ms(latencies)
    return Row("openenv_gym make_vec", sessions, sessions * len(latencies) / elapsed, p50, p99,
               (rss - idle) / sessions)


def measure_wire(sessions: int, workers: int, budget_s: float, connections_per_worker: int) -> Row:
    """Batched JSON over WebSocket with nothing else: each step is one frame per connection each way, over as
    many connections as ours uses."""
    import uvloop
    from websockets.asyncio.client import connect

    server = subprocess.Popen([sys.executable, str(HERE / "wire_server.py"), "--mode", "batch", "--workers",
                               str(workers)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    url = server.stdout.readline().strip()

    async def run() -> tuple[list[float], float]:
        conns = [await connect(url, compression=None, ping_interval=None, max_size=None)
                 for _ in range(connections_per_worker * workers)]
        chunks = np.array_split(np.arange(sessions), len(conns))
        session = "0123456789abcdefghijkl"

        async def exchange(ws, ids) -> None:
            await ws.send(orjson.dumps([{"id": int(i), "op": "step", "session": session, "action": "hi"}
                                        for i in ids]), text=True)
            orjson.loads(await ws.recv())

        latencies: list[float] = []
        started = time.perf_counter()
        while len(latencies) < 5 or time.perf_counter() - started < budget_s:
            t = time.perf_counter()
            await asyncio.gather(*(exchange(ws, ids) for ws, ids in zip(conns, chunks, strict=True) if len(ids)))
            latencies.append(time.perf_counter() - t)
        elapsed = time.perf_counter() - started
        for ws in conns:
            await ws.close()
        return latencies, elapsed

    try:
        latencies, elapsed = uvloop.run(run())
    finally:
        server.stdin.close()
        server.wait(timeout=30)
    p50, p99 = _percentiles_ms(latencies)
    return Row("wire limit (websockets+orjson)", sessions, sessions * len(latencies) / elapsed, p50, p99)


def openenv_python(venv: Path) -> Path:
    """The python of a venv with openenv==0.10.0, created on first use."""
    python = venv / "bin" / "python"
    marker = venv / f".openenv-{OPENENV_VERSION}"
    if not marker.exists():
        print(f"creating {venv} with openenv=={OPENENV_VERSION} (first run only)...", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", f"openenv=={OPENENV_VERSION}"], check=True)
        marker.touch()
    return python


def measure_openenv(python: Path, sessions: int, workers: int, async_env: bool, steps: int) -> Row:
    command = [str(python), str(HERE / "openenv_peer.py"), "--sessions", str(sessions), "--steps", str(steps),
               "--workers", str(workers)] + (["--async-env"] if async_env else [])
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    name = f"OpenEnv {OPENENV_VERSION} " + (f"tuned (async env, {workers} worker{'s' * (workers > 1)})"
                                            if async_env else "template (sync env, 1 worker)")
    if done.returncode != 0 or not done.stdout.strip():
        print(f"{name} at {sessions} sessions failed:\n{done.stderr[-2000:]}", file=sys.stderr)
        return Row(name, sessions, 0.0, float("nan"), float("nan"), errors=-1)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    rss = (result["server_rss_sessions"] - result["server_rss_idle"]) / max(1, result["sessions_open"])
    return Row(name, sessions, result["steps_per_s"], result["p50_ms"], result["p99_ms"], rss,
               result["errors"] + sessions - result["sessions_open"])


def print_table(rows: list[Row]) -> str:
    by_key = {(r.system, r.sessions): r for r in rows}
    lines = ["| system | sessions | steps/s | p50 ms | p99 ms | server bytes/session | errors | ours / this |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        ours = by_key.get(("openenv_gym make_vec", r.sessions))
        ratio = f"{ours.steps_per_s / r.steps_per_s:.1f}x" if ours and r.steps_per_s else "—"
        rss = f"{r.rss_per_session:,.0f}" if r.rss_per_session is not None else "—"
        lines.append(f"| {r.system} | {r.sessions:,} | {r.steps_per_s:,.0f} | {r.p50_ms:.2f} | {r.p99_ms:.2f} | "
                     f"{rss} | {r.errors} | {ratio} |")
    table = "\n".join(lines)
    print(table)
    return table


def plot(rows: list[Row], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for system in dict.fromkeys(r.system for r in rows):
        points = [(r.sessions, r.steps_per_s) for r in rows if r.system == system and r.steps_per_s > 0]
        ax.plot(*zip(*points, strict=True), marker="o", label=system)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("concurrent sessions")
    ax.set_ylabel("echo steps / s")
    ax.set_title("Throughput on one 2-core machine (client and server)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.throughput", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, nargs="+", default=list(DEFAULT_SIZES))
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="server workers (ours, tuned)")
    parser.add_argument("--seconds", type=float, default=3.0, help="time budget per measurement")
    parser.add_argument("--connections-per-worker", type=int, default=2,
                        help="WebSocket connections per server worker, ours and the wire limit alike (default 2)")
    parser.add_argument("--openenv-steps", type=int, default=20, help="steps per OpenEnv session")
    parser.add_argument("--openenv-venv", type=Path, default=Path(".venv-openenv"))
    parser.add_argument("--skip-openenv", action="store_true")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = parser.parse_args(argv)

    python = None if args.skip_openenv else openenv_python(args.openenv_venv)
    jobs = []
    for n in args.sessions:
        jobs.append(lambda n=n: measure_ours(n, args.workers, args.seconds, args.connections_per_worker))
        jobs.append(lambda n=n: measure_wire(n, args.workers, args.seconds, args.connections_per_worker))
        if python is not None:
            jobs.append(lambda n=n: measure_openenv(python, n, 1, False, args.openenv_steps))
            jobs.append(lambda n=n: measure_openenv(python, n, args.workers, True, args.openenv_steps))
    rows = [job() for job in tqdm(jobs, desc="bench", unit="run")]
    rows.sort(key=lambda r: (r.sessions, r.system))
    table = print_table(rows)
    wire = {r.sessions: r for r in rows if r.system.startswith("wire")}
    for r in rows:
        if r.system == "openenv_gym make_vec" and r.sessions in wire:
            print(f"ours / wire limit at {r.sessions:,} sessions: {r.steps_per_s / wire[r.sessions].steps_per_s:.2f}")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "throughput.json").write_text(json.dumps([asdict(r) for r in rows], indent=2))
    (args.out / "throughput.md").write_text(table + "\n")
    plot(rows, args.out / "throughput.png")
    print(f"results and plot in {args.out}/")


if __name__ == "__main__":
    main()

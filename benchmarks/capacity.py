"""Capacity and scaling figures. Run: make bench, or python -m benchmarks.capacity.

- one server holds 100,000 concurrent echo sessions: server memory per idle session, a few steps
  of all of them, errors;
- 10,000 separate WebSocket connections, each with one session, all stepping: errors;
- a CPU-bound environment with 2 workers against 1 worker: throughput ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path

import uvloop

from openenv_gym.cli.procinfo import tree_rss
from openenv_gym.client.local import LocalServer
from openenv_gym.client.vector import AsyncVectorClient

HERE = Path(__file__).parent
RESULTS = HERE / "results"


async def hold_sessions(url: str, sessions: int, connections_per_worker: int, steps: int) -> dict:
    """Open `sessions` sessions, step them all `steps` times; count errors."""
    async with AsyncVectorClient(url, sessions, connections_per_worker=connections_per_worker,
                                 request_timeout=600) as client:
        started = time.perf_counter()
        result = await client.reset(seed=0, options={"max_steps": 10**9})
        reset_s = time.perf_counter() - started
        errors = len(result.errors)
        step_times = []
        for _ in range(steps):
            started = time.perf_counter()
            result = await client.step(["hi"] * sessions)
            step_times.append(time.perf_counter() - started)
            errors += len(result.errors) + sum(obs != "hi" for obs in result.obs)
        connections = sum(len(transport.connections) for transport in client.transports)
        return {"connections": connections, "reset_s": reset_s, "errors": errors,
                "step_s": step_times}


def many_sessions(sessions: int, steps: int) -> dict:
    server = LocalServer("echo", 2, sessions + 1000)
    try:
        idle = tree_rss(server.process.pid)
        holding: dict = {}

        async def run() -> None:
            async with AsyncVectorClient(server.url, sessions, request_timeout=600) as client:
                result = await client.reset(seed=0, options={"max_steps": 10**9})
                holding["errors"] = len(result.errors)
                holding["rss"] = tree_rss(server.process.pid)
                for _ in range(steps):
                    result = await client.step(["hi"] * sessions)
                    holding["errors"] += len(result.errors)

        uvloop.run(run())
    finally:
        server.stop()
    return {"sessions": sessions, "server_rss_idle": idle, "server_rss_with_sessions": holding["rss"],
            "bytes_per_session": (holding["rss"] - idle) / sessions, "errors": holding["errors"]}


def many_connections(connections: int, steps: int) -> dict:
    server = LocalServer("echo", 2, connections + 1000)
    try:
        out = uvloop.run(hold_sessions(server.url, connections, connections // 2, steps))
    finally:
        server.stop()
    return {"sessions": connections, "connections": out["connections"], "errors": out["errors"],
            "step_s": out["step_s"]}


async def steps_per_second(url: str, sessions: int, seconds: float) -> float:
    async with AsyncVectorClient(url, sessions) as client:
        await client.reset()
        await client.step(["x"] * sessions)
        started, count = time.perf_counter(), 0
        while time.perf_counter() - started < seconds:
            await client.step(["x"] * sessions)
            count += sessions
        return count / (time.perf_counter() - started)


def cpu_scaling(seconds: float, sessions: int = 256) -> dict:
    rates = {}
    for workers in (1, 2):
        server = LocalServer(str(HERE / "envs" / "cpu"), workers, 10_000)
        try:
            rates[workers] = uvloop.run(steps_per_second(server.url, sessions, seconds))
        finally:
            server.stop()
    return {"steps_per_s_1_worker": rates[1], "steps_per_s_2_workers": rates[2], "ratio": rates[2] / rates[1]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=100_000)
    parser.add_argument("--connections", type=int, default=10_000)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=4.0)
    args = parser.parse_args()

    results = {"many_sessions": many_sessions(args.sessions, args.steps)}
    m = results["many_sessions"]
    print(f"{m['sessions']:,} sessions on one server: {m['bytes_per_session']:,.0f} server bytes per idle session, "
          f"{m['errors']} errors over {args.steps} steps of all of them")
    results["many_connections"] = c = many_connections(args.connections, args.steps)
    print(f"{c['connections']:,} WebSocket connections, one session each, all stepping: {c['errors']} errors "
          f"(step of all: {min(c['step_s']) * 1000:.0f} ms)")
    results["cpu_scaling"] = s = cpu_scaling(args.seconds)
    print(f"CPU-bound env: {s['steps_per_s_1_worker']:,.0f} steps/s with 1 worker, "
          f"{s['steps_per_s_2_workers']:,.0f} with 2: {s['ratio']:.2f}x")
    asyncio.set_event_loop_policy(None)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "capacity.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()

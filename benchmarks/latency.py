"""Single-session latency and start-up figures. Run: make bench, or python -m benchmarks.latency.

Measured in one run, on this machine:
- the anchor: a bare websockets round trip (uvloop client and echo server, no environment);
- RemoteEnv.step round trip on the embedded echo server (p50/p99), and its ratio to the anchor;
- the async Session.step round trip (the same without the sync facade);
- `import openenv_gym` time and gym.make("openenv/echo") (embedded) to first observation.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import uvloop
from websockets.asyncio.client import connect as ws_connect

import openenv_gym
from openenv_gym.client.local import local_server_url
from openenv_gym.manifests import find_manifest

HERE = Path(__file__).parent
RESULTS = HERE / "results"
WIRE_SERVER = HERE / "wire_server.py"


def percentiles(seconds: list[float]) -> dict[str, float]:
    us = np.asarray(seconds) * 1e6
    return {"p50_us": float(np.percentile(us, 50)), "p99_us": float(np.percentile(us, 99)), "n": len(us)}


def bare_websocket_roundtrip(n: int) -> dict[str, float]:
    server = subprocess.Popen([sys.executable, str(WIRE_SERVER), "--mode", "echo"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    url = server.stdout.readline().strip()

    async def measure() -> list[float]:
        async with ws_connect(url, compression=None, ping_interval=None) as ws:
            message = '[{"id":1,"op":"step","session":"0123456789abcdefghijkl","action":"hi"}]'
            times = []
            for _ in range(n):
                start = time.perf_counter()
                await ws.send(message)
                await ws.recv()
                times.append(time.perf_counter() - start)
            return times

    try:
        return percentiles(uvloop.run(measure()))
    finally:
        server.stdin.close()
        server.wait()


def remote_env_step(n: int) -> dict[str, float]:
    env = gym.make("openenv/echo")
    warmup = 200
    env.reset(options={"max_steps": n + warmup + 1})
    for _ in range(warmup):
        env.step("hi")
    times = []
    for _ in range(n):
        start = time.perf_counter()
        env.step("hi")
        times.append(time.perf_counter() - start)
    env.close()
    return percentiles(times)


def async_session_step(n: int) -> dict[str, float]:
    url = local_server_url(str(find_manifest("echo").folder))  # the server gym.make("openenv/echo") uses

    async def measure() -> list[float]:
        async with openenv_gym.connect(url) as conn:
            session = conn.session()
            await session.reset(options={"max_steps": n + 10})
            times = []
            for _ in range(n):
                start = time.perf_counter()
                await session.step("hi")
                times.append(time.perf_counter() - start)
            return times

    return percentiles(uvloop.run(measure()))


def subprocess_seconds(code: str, repeats: int) -> float:
    """Median of what `code` prints (a duration in seconds), each run in a fresh interpreter."""
    runs = [float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
                  .stdout.strip().splitlines()[-1]) for _ in range(repeats)]
    return statistics.median(runs)


IMPORT_CODE = "import time; t = time.perf_counter(); import openenv_gym; print(time.perf_counter() - t)"
FIRST_OBS_CODE = """
import time, gymnasium as gym, openenv_gym
t = time.perf_counter()
env = gym.make("openenv/echo")
env.reset()
print(time.perf_counter() - t)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    results = {
        "anchor_bare_websocket": bare_websocket_roundtrip(args.steps),
        "remote_env_step": remote_env_step(args.steps),
        "async_session_step": async_session_step(args.steps),
        "import_openenv_gym_s": subprocess_seconds(IMPORT_CODE, args.repeats),
        "make_to_first_obs_s": subprocess_seconds(FIRST_OBS_CODE, args.repeats),
    }
    anchor = results["anchor_bare_websocket"]["p50_us"]
    print(f"{'round trip':34} {'p50 µs':>9} {'p99 µs':>9} {'p50 / anchor':>13}")
    for name in ("anchor_bare_websocket", "remote_env_step", "async_session_step"):
        row = results[name]
        print(f"{name:34} {row['p50_us']:9.1f} {row['p99_us']:9.1f} {row['p50_us'] / anchor:13.2f}")
    print(f"import openenv_gym: {results['import_openenv_gym_s'] * 1000:.0f} ms (median of {args.repeats})")
    print(f"gym.make('openenv/echo') embedded to first observation: {results['make_to_first_obs_s']:.2f} s "
          f"(median of {args.repeats})")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "latency.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    asyncio.set_event_loop_policy(None)
    main()

"""Resume under forced disconnects: a TCP proxy cuts every connection again and again while sessions step.

    python -m benchmarks.resume [--cuts 20]      # part of `make bench`

256 sessions on an echo server with 2 workers step in lock-step through benchmarks/tcp_proxy.py, which cuts
every connection every 0.3 s. Each step's answer carries the env's own step count (`info["step"]`): a lost
step shows as a count behind the client's, a step applied twice as one ahead. Reported: steps, cuts, resumes,
lost and duplicated steps (the goal: 0 and 0), and the steps/s with the cuts against the same run without.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from urllib.parse import urlsplit

from benchmarks.measures import save_result
from benchmarks.tcp_proxy import CuttingProxy

SESSIONS = 256


async def _run(url: str, cuts: int, every: float) -> dict:
    import openenv_gym

    async with CuttingProxy(urlsplit(url).port) as proxy, openenv_gym.AsyncVectorClient(proxy.url, SESSIONS) as client:
        await client.reset(options={"max_steps": 10**9})
        steps, lost, repeated = 0, 0, 0
        started = time.perf_counter()
        next_cut = started + every
        while proxy.cuts < cuts:
            result = await client.step(["r"] * SESSIONS)
            steps += 1
            counts = [info.get("step", 0) for info in result.infos]
            lost += sum(count < steps for count in counts)
            repeated += sum(count > steps for count in counts)
            if time.perf_counter() >= next_cut:
                proxy.cut()
                next_cut += every
        elapsed = time.perf_counter() - started
        resumed = sum(conn.resumed for transport in client.transports for conn in transport.connections)
    return {"steps": steps * SESSIONS, "cuts": cuts, "resumes": resumed, "lost": lost, "duplicated": repeated,
            "seconds": elapsed, "steps_per_s": steps * SESSIONS / elapsed}


async def _uncut(url: str, seconds: float) -> float:
    import openenv_gym

    async with openenv_gym.AsyncVectorClient(url, SESSIONS) as client:
        await client.reset(options={"max_steps": 10**9})
        steps, started = 0, time.perf_counter()
        while time.perf_counter() - started < seconds:
            await client.step(["r"] * SESSIONS)
            steps += 1
        return steps * SESSIONS / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cuts", type=int, default=20)
    parser.add_argument("--every", type=float, default=0.3, help="seconds between cuts")
    args = parser.parse_args()
    from openenv_gym.client.local import LocalServer

    server = LocalServer("echo", 2, 100_000)
    try:
        result = asyncio.run(_run(server.url, args.cuts, args.every))
        result["uncut_steps_per_s"] = asyncio.run(_uncut(server.url, result["seconds"]))
    finally:
        server.stop()
    save_result("resume", result)
    print(f"resume: {result['steps']:,} steps through {result['cuts']} cuts of every connection "
          f"({result['resumes']} resumes): {result['lost']} lost, {result['duplicated']} duplicated (goal 0, 0); "
          f"{result['steps_per_s']:,.0f} steps/s with the cuts, {result['uncut_steps_per_s']:,.0f} without "
          f"({result['steps_per_s'] / result['uncut_steps_per_s']:.2f}x)")


if __name__ == "__main__":
    main()

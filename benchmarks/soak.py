"""Soak: a long run of steps and session churn against one worker, watching its memory and open files.

    python -m benchmarks.soak [--steps 2000000]       # part of `make bench`

1,024 sessions step in lock-step on an echo server with one worker; every 20 steps of the batch the client
closes and a new one opens (new connections, new sessions: 146 times in the default 3 M steps). The worker's
RSS and open file descriptors are read after a warm-up (10% of the steps, by when the allocator has reached
its working size) and at the end. Goals: RSS growth under 5%, fds flat.
"""

from __future__ import annotations

import argparse
import asyncio
import time

from tqdm import tqdm

from benchmarks.measures import open_fds, rss_bytes, save_result

SESSIONS = 1024
CHURN_EVERY = 20  # batches between client reconnections


async def soak(url: str, pid: int, total_steps: int, churn_every: int) -> dict:
    import openenv_gym

    batches = total_steps // SESSIONS
    warm_up = batches // 10
    marks: dict[str, dict] = {}
    done = 0
    started = time.perf_counter()
    with tqdm(total=batches * SESSIONS, unit="step", unit_scale=True, desc="soak", leave=False) as bar:
        while done < batches:
            async with openenv_gym.AsyncVectorClient(url, SESSIONS) as client:
                await client.reset(options={"max_steps": 10**9})
                for _ in range(min(churn_every, batches - done)):
                    result = await client.step(["soak"] * SESSIONS)
                    assert not result.errors, result.errors
                    done += 1
                    bar.update(SESSIONS)
                    if done == warm_up:
                        await asyncio.sleep(6)  # a housekeeping round (memory given back) before reading
                        marks["warm"] = {"rss": rss_bytes(pid), "fds": open_fds(pid)}
    await asyncio.sleep(6)
    marks["end"] = {"rss": rss_bytes(pid), "fds": open_fds(pid)}
    elapsed = time.perf_counter() - started
    return {"steps": done * SESSIONS, "seconds": elapsed, "steps_per_s": done * SESSIONS / elapsed,
            "rss_mib": {k: v["rss"] / 2**20 for k, v in marks.items()},
            "rss_growth": marks["end"]["rss"] / marks["warm"]["rss"] - 1,
            "fds": {k: v["fds"] for k, v in marks.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=3_000_000)
    parser.add_argument("--churn-every", type=int, default=CHURN_EVERY, help="batches between client reconnections")
    args = parser.parse_args()
    from openenv_gym.client.local import LocalServer

    server = LocalServer("echo", 1, 100_000)
    try:
        result = asyncio.run(soak(server.url, server.process.pid, args.steps, args.churn_every))
    finally:
        server.stop()
    save_result("soak", result)
    rss, fds = result["rss_mib"], result["fds"]
    print(f"soak: {result['steps']:,} steps in {result['seconds']:.0f} s ({result['steps_per_s']:,.0f} steps/s), "
          f"{result['steps'] // (SESSIONS * args.churn_every)} client reconnections; worker RSS {rss['warm']:.1f} -> "
          f"{rss['end']:.1f} MiB ({result['rss_growth']:+.1%}, goal < 5%); fds {fds['warm']} -> {fds['end']}")


if __name__ == "__main__":
    main()

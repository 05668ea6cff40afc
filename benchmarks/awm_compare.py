"""AWM tool worlds two ways, one run, on this machine: AWM's way (a process per session: the world's generated
app run by uvicorn on its own copy of the database, tool calls over HTTP, as AWM's runner and OpenEnv's port
do; fastapi-mcp is left out, it needs mcp<2) against ours (the worlds imported with `openenv-gym import`,
served in process by one 2-worker server, tool calls over our WebSocket).

- reset: ours, a session's reset one at a time (p50/p99); AWM's way, start a process on a fresh copy of the
  database until it answers (p50/p99 over the sessions, started 16 at a time).
- tool calls: every session calls `search_books` in a loop for --seconds, all at once; calls/s, p50/p99.
- memory per session: the server's resident memory with the sessions open, less idle, per session; AWM's
  way, the processes' own.
- sessions held: --hold sessions of ours reset and stepped, with the errors and the memory per session.

    python -m benchmarks.awm_compare [--sessions 256] [--hold 1000] [--seconds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np

from benchmarks.episodes import ROOT, imported_server
from benchmarks.measures import save_result
from benchmarks.ors_compare import free_port
from openenv_gym.cli.procinfo import tree_rss

sys.path.insert(0, str(ROOT / "tests"))  # the AWM worlds written for the tests: the dataset's hub is unreachable
from awm_worlds import WORLDS, awm_server_code, write_dataset

SCENARIO = "bookstore_1"
CALL = {"name": "search_books", "arguments": {"author": "Ursula K. Le Guin"}}
START_AT_ONCE = 16


def ms(seconds: list[float]) -> dict[str, float]:
    values = np.asarray(seconds) * 1000
    return {"p50_ms": float(np.percentile(values, 50)), "p99_ms": float(np.percentile(values, 99)), "n": len(values)}


# -- AWM's way -------------------------------------------------------------------------------------------------

async def start_world(python: Path, template: Path, folder: Path) -> tuple[subprocess.Popen, str, float]:
    """One session the AWM way: a copy of the database, the app with its create_engine line rewritten (as AWM's
    runner writes it) in its own process; (process, url, seconds)."""
    started = time.perf_counter()
    folder.mkdir()
    shutil.copyfile(template, folder / "db.sqlite")
    (folder / "server.py").write_text(awm_server_code((WORLDS / SCENARIO / "app.py").read_text(), folder / "db.sqlite"))
    port = free_port()
    process = subprocess.Popen([str(python), str(folder / "server.py")], cwd=folder,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               env=os.environ | {"PORT": str(port)})
    url = f"http://127.0.0.1:{port}"
    async with httpx.AsyncClient(timeout=2) as http:
        while True:
            try:
                (await http.get(url + "/openapi.json")).raise_for_status()
                break
            except httpx.HTTPError:
                if process.poll() is not None:
                    raise RuntimeError("a world process died at start") from None
                await asyncio.sleep(0.05)
    return process, url, time.perf_counter() - started


async def awm_way(python: Path, template: Path, sessions: int, seconds: float) -> dict:
    scratch = Path(tempfile.mkdtemp(prefix="awm-way-"))
    processes: list[subprocess.Popen] = []
    try:
        urls, resets = [], []
        gate = asyncio.Semaphore(START_AT_ONCE)

        async def one(k: int) -> None:
            async with gate:
                process, url, took = await start_world(python, template, scratch / str(k))
            processes.append(process)
            urls.append(url)
            resets.append(took)

        await asyncio.gather(*(one(k) for k in range(sessions)))
        rss = sum(tree_rss(p.pid) for p in processes)
        latencies: list[float] = []
        limits = httpx.Limits(max_connections=sessions, max_keepalive_connections=sessions)
        async with httpx.AsyncClient(timeout=30, limits=limits) as http:
            deadline = time.perf_counter() + seconds

            async def caller(url: str) -> None:
                while time.perf_counter() < deadline:
                    t = time.perf_counter()
                    (await http.get(url + "/books", params=CALL["arguments"])).raise_for_status()
                    latencies.append(time.perf_counter() - t)

            started = time.perf_counter()
            await asyncio.gather(*(caller(u) for u in urls))
            elapsed = time.perf_counter() - started
        return {"reset": ms(resets), "call": ms(latencies), "calls_per_s": len(latencies) / elapsed,
                "bytes_per_session": rss / sessions, "sessions": sessions}
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(timeout=30)
        shutil.rmtree(scratch, ignore_errors=True)


# -- ours -------------------------------------------------------------------------------------------------------

async def ours(url: str, pid: int, sessions: int, seconds: float) -> dict:
    import openenv_gym
    from openenv_gym.client.vector import AsyncVectorClient

    async with openenv_gym.connect(url) as conn:
        resets = []
        for _ in range(200):  # one at a time: the latency of a reset
            session = conn.session()
            t = time.perf_counter()
            await session.reset(options={"scenario": SCENARIO, "task_idx": 0})
            resets.append(time.perf_counter() - t)
            await session.close()
    async with AsyncVectorClient(url, 16) as warm:  # every worker loads the world before memory is read
        await warm.reset(options={"scenario": SCENARIO, "task_idx": 0})
    idle = tree_rss(pid)
    async with AsyncVectorClient(url, sessions) as client:  # sessions spread over the workers
        await client.reset(options={"scenario": SCENARIO, "task_idx": 0, "max_steps": 10**9})  # no truncation
        rss = tree_rss(pid) - idle
        latencies: list[float] = []
        sent = np.full(sessions, time.perf_counter())
        client.send([CALL] * sessions)
        started = time.perf_counter()
        deadline = started + seconds
        while time.perf_counter() < deadline:  # each session calls again as soon as it has its answer
            result = await client.recv(min_results=1)
            now = time.perf_counter()
            latencies += (now - sent[result.ids]).tolist()
            sent[result.ids] = now
            client.send([CALL] * len(result.ids), ids=result.ids)
        elapsed = time.perf_counter() - started
        await client.recv(min_results=sessions)  # let the last calls land before the sessions close
    return {"reset": ms(resets), "call": ms(latencies), "calls_per_s": len(latencies) / elapsed,
            "bytes_per_session": rss / sessions, "sessions": sessions}


async def hold(url: str, pid: int, sessions: int) -> dict:
    """`sessions` sessions open at once, each reset and stepped: errors and memory per session."""
    import openenv_gym

    idle = tree_rss(pid)
    errors = 0
    async with openenv_gym.connect(url) as conn:
        group = [conn.session() for _ in range(sessions)]

        async def one(session, k: int) -> None:
            nonlocal errors
            try:
                await session.reset(options={"split": "train", "index": k % 6})
                await session.step(CALL if k % 6 < 3 else {"name": "list_projects", "arguments": {}})
            except Exception:
                errors += 1

        await asyncio.gather(*(one(s, k) for k, s in enumerate(group)))
        rss = tree_rss(pid) - idle
    return {"sessions": sessions, "errors": errors, "bytes_per_session": rss / sessions}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=256, help="concurrent sessions for the comparison")
    parser.add_argument("--hold", type=int, default=1000, help="sessions one server of ours holds")
    parser.add_argument("--seconds", type=float, default=5.0, help="seconds of tool calls per side")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="our server's workers")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        dataset = write_dataset(Path(scratch) / "data")
        with imported_server(dataset, "bench-awm", args.workers, max(args.sessions, args.hold) + 300) as served:
            template = served.folder / "worlds" / SCENARIO / "template.db"
            mine = asyncio.run(ours(served.url, served.pid, args.sessions, args.seconds))
            held = asyncio.run(hold(served.url, served.pid, args.hold))
            theirs = asyncio.run(awm_way(served.python, template, args.sessions, args.seconds))
    ratio = mine["calls_per_s"] / max(theirs["calls_per_s"], 1e-9)
    for name, side in (("AWM's way (a process per session)", theirs), ("openenv_gym in process", mine)):
        print(f"{name:36} reset p50 {side['reset']['p50_ms']:8.1f} ms p99 {side['reset']['p99_ms']:8.1f} ms | "
              f"{side['calls_per_s']:9,.0f} calls/s at {side['sessions']} sessions, p50 {side['call']['p50_ms']:.1f} "
              f"ms p99 {side['call']['p99_ms']:.1f} ms | {side['bytes_per_session'] / 2**20:7.2f} MiB/session",
              flush=True)
    print(f"ours / AWM's way: {ratio:.1f}x the tool calls per second; one server of ours held {held['sessions']:,} "
          f"sessions, {held['errors']} errors, {held['bytes_per_session'] / 2**20:.2f} MiB per session", flush=True)
    result = {"awm_way": theirs, "ours": mine, "hold": held, "ratio": ratio}
    save_result("awm_compare", result)
    return result


if __name__ == "__main__":
    main()

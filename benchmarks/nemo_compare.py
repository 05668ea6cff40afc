"""NeMo Gym resource servers: tool calls/s through openenv_gym against NeMo Gym's own server process, same run, and
thousands of concurrent episodes on one server.

    python -m benchmarks.nemo_compare [--sessions 256] [--rounds 2] [--workers 1] [--capacity 10000]

Throughput: workplace_assistant (as nemo-gym 0.7.0 ships it; 27 tools over per-session pandas tables). Every player
plays its row's ground-truth tool calls, cycled to `--calls` calls an episode, then ends it (/verify). Ours: the
server imported with `openenv-gym import`, served by `openenv-gym serve --workers N` (in process, through ASGI),
players driven by the async vector client from this process. Theirs: the same server in NeMo Gym's own process (its
run_webserver under uvicorn, one worker, as `gym env start` runs it), driven as its agents drive it (aiohttp, one
request per call, cookies carried by hand: nemo_peer.py). Both sides count tool calls over the whole run (the seeds
and verifies included).

Capacity: `--capacity` episodes of example_session_state_mgmt at once on one server of N workers, each adding its
own amounts to its cookie-held counter and reading it back: errors, and episodes that read another's count.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from pathlib import Path
from typing import Any

from benchmarks.episodes import ROOT, Tally, comparison_arguments, report
from benchmarks.nemo_peer import NemoOwnServer, drive
from openenv_gym.client.local import LocalServer
from openenv_gym.importers import import_environment
from openenv_gym.manifests import load_manifest
from openenv_gym.manifests.venvs import ensure_venv

LOOKUP = ("company_directory_find_email_address", {"name": "Raj"})  # workplace_assistant's cheapest read
TALLY = ROOT / "tests" / "nemo_servers" / "resources_servers" / "tally"  # ours: its import builds nemo-gym's venv


def installed_servers(out: Path) -> Path:
    """Where the venv's nemo-gym keeps the resource servers it ships (the venv built by importing ours)."""
    tally = import_environment(TALLY, "bench-tally", out, force=True, check=False)[0].folder
    python = str(ensure_venv(load_manifest(tally)))
    site = subprocess.run([python, "-c", "import nemo_gym, os; print(os.path.dirname(os.path.dirname("
                                         "nemo_gym.__file__)))"], capture_output=True, text=True, check=True)
    return Path(site.stdout.strip()) / "resources_servers"


def rows_of(folder: Path) -> list[dict[str, Any]]:
    manifest = load_manifest(folder)
    path = folder / next(iter(manifest.splits.values()))
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def ground_truth_calls(rows: list[dict[str, Any]], count: int) -> list[list[tuple[str, dict]]]:
    """Each row's ground-truth tool calls, cycled to `count` calls."""
    plays = []
    for row in rows:
        calls = [(call["name"], json.loads(call["arguments"])) for call in row["ground_truth"]]
        plays.append([calls[index % len(calls)] for index in range(count)])
    return plays


async def ours(url: str, rows: list[dict], plays: list[list[tuple[str, dict]]], sessions: int, rounds: int) -> dict:
    """Players on our server: reset on the row, one step per tool call, then a text that ends (verifies) it."""
    from openenv_gym.client.vector import AsyncVectorClient

    left, done = [rounds] * sessions, [0] * sessions  # episodes to play; calls made in this episode
    tally = Tally()
    async with AsyncVectorClient(url, sessions, request_timeout=600) as client:
        for env in range(sessions):
            client.send_reset([env], options={"task": env % len(rows)})
        while client.in_flight.any():
            result = await client.recv(min_results=1)
            tally.errors += len(result.errors)
            stepping, actions = [], []
            for env, ended in zip(result.ids.tolist(), result.terminated | result.truncated, strict=True):
                if ended:
                    left[env] -= 1
                    if left[env]:
                        client.send_reset([env], options={"task": env % len(rows)})
                    continue
                calls = plays[env % len(plays)]
                if done[env] < len(calls):
                    name, arguments = calls[done[env]]
                    actions.append({"name": name, "arguments": arguments})
                    done[env] += 1
                    tally.steps += 1
                else:
                    actions.append("Done.")
                    done[env] = 0
                stepping.append(env)
            if stepping:
                client.send(actions, stepping)
    return tally.figures()


async def capacity(url: str, episodes: int) -> dict[str, Any]:
    """`episodes` of example_session_state_mgmt at once: each adds its own amounts, reads its counter back."""
    import openenv_gym

    started = time.perf_counter()
    async with openenv_gym.connect(url, request_timeout=900) as conn:
        async def play(k: int) -> str | None:
            session = conn.session()
            try:
                _, info = await session.reset(options={"task": k % 5, "expose_answer": True})
                for amount in (k, 7):
                    await session.step({"name": "increment_counter", "arguments": {"count": amount}})
                counted = await session.step({"name": "get_counter_value", "arguments": {}})
                if json.loads(counted[0])["count"] != info["task_data"]["initial_count"] + k + 7:
                    return "crossed"
                await session.close()
                return None
            except Exception as exc:  # counted, by kind
                return type(exc).__name__

        outcomes = await asyncio.gather(*(play(k) for k in range(episodes)))
    return {"episodes": episodes, "errors": sum(o not in (None, "crossed") for o in outcomes),
            "cross_episode_state": outcomes.count("crossed"), "seconds": time.perf_counter() - started,
            "error_kinds": sorted({o for o in outcomes if o not in (None, "crossed")})}


def main(argv: list[str] | None = None) -> dict:
    # one worker: NeMo Gym serves a stateful server with one (its uvicorn workers share no sessions)
    args = comparison_arguments(argv, __doc__, sessions=256, workers=1, extra={
        "calls": (20, "tool calls an episode"),
        "capacity": (10_000, "episodes of example_session_state_mgmt at once (0: none)"),
        "lookups": (0, "1: every call is the one cheapest read (a directory lookup), not the rows' ground truth")})
    calls = args.calls
    out = args.out / "nemo_imports"
    out.mkdir(parents=True, exist_ok=True)
    servers = installed_servers(out)
    workplace = import_environment(servers / "workplace_assistant", "bench-workplace", out, force=True,
                                   check=False)[0].folder
    rows = rows_of(workplace)
    plays = ground_truth_calls(rows, calls) if not args.lookups else [[LOOKUP] * calls]
    with LocalServer(str(workplace), args.workers, args.sessions + 100) as served:
        mine = asyncio.run(ours(served.url, rows, plays, args.sessions, args.rounds))
    with NemoOwnServer.of(load_manifest(workplace)) as own:
        theirs = asyncio.run(drive(own.url, rows, plays, args.sessions, args.rounds))
    what = "one directory lookup" if args.lookups else "its ground-truth calls"
    result = report(args, f"NeMo Gym workplace_assistant tool calls ({calls} an episode, {what})", mine,
                    ("nemo_gym_server", "NeMo Gym's own server process (uvicorn), aiohttp as its agents", theirs),
                    "nemo_throughput.json", unit="tool calls/s")
    if args.capacity:
        state = import_environment(servers / "example_session_state_mgmt", "bench-state", out, force=True,
                                   check=False)[0].folder
        with LocalServer(str(state), args.workers, args.capacity + 100) as served:
            result["capacity"] = held = asyncio.run(capacity(served.url, args.capacity))
        print(f"  {held['episodes']:,} example_session_state_mgmt episodes at once on {args.workers} worker(s): "
              f"{held['errors']} errors, {held['cross_episode_state']} read another's state, "
              f"{held['seconds']:.1f} s")
        (args.out / "nemo_throughput.json").write_text(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()

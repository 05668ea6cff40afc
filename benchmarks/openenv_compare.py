"""OpenEnv both ways, one run: one OpenEnv environment (OpenEnv's template echo env, benchmarks/envs/openenv_echo)
served and driven three ways, at each session count:

- anchor: OpenEnv's own server (create_app + uvicorn, 1 worker, max_concurrent_envs = the sessions) driven by
  OpenEnv's own GenericEnvClient (one socket per session);
- our server, the env imported with `openenv-gym import --inline-sync` (1 worker), driven by the same
  GenericEnvClient over our OpenEnv front end (/ws);
- our server (the same import, 1 worker) driven by our vector client, as gym.make_vec does (lock-step batches).

Then the sockets one worker holds: --hold OpenEnv-client sockets on our 1-worker server, each reset and stepped
once, with the server's memory and threads. Every session sends {"message": "hi"} ("hi" for ours: its one text
field). steps/s = steps / wall time, from both sides' clients on the same 2 cores as the server.

    python -m benchmarks.openenv_compare [--sessions 64 1024 4096] [--steps 20000] [--hold 10000]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path

from benchmarks.episodes import ENVS, imported_server, run_peer
from benchmarks.measures import save_result
from benchmarks.openenv_server import openenv_server

ECHO = ENVS / "openenv_echo"


def http(url: str) -> str:
    return "http://" + url.removeprefix("ws://")


def peer(python: Path, url: str, sessions: int, steps: int, pid: int | None = None) -> dict:
    """OpenEnv's GenericEnvClient: `sessions` sockets, a reset and `steps` steps each (benchmarks/openenv_peer.py)."""
    args = ["--url", url, "--sessions", str(sessions), "--steps", str(steps), "--deadline", "600"]
    return run_peer(python, "benchmarks.openenv_peer", *args, *(["--server-pid", str(pid)] if pid else []))


async def make_vec(url: str, sessions: int, budget_s: float) -> dict:
    from openenv_gym.client.vector import AsyncVectorClient

    async with AsyncVectorClient(url, sessions) as client:
        await client.reset(seed=0)
        errors, batches, started = 0, 0, time.perf_counter()
        while batches < 5 or time.perf_counter() - started < budget_s:
            result = await client.step(["hi"] * sessions)
            errors += sum(error is not None for error in result.errors) if result.errors else 0
            batches += 1
        elapsed = time.perf_counter() - started
    return {"steps_per_s": batches * sessions / elapsed, "errors": errors, "steps": batches * sessions}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, nargs="+", default=[64, 1024, 4096])
    parser.add_argument("--steps", type=int, default=20_000,
                        help="steps in all for OpenEnv's client (at least 20 per session)")
    parser.add_argument("--budget", type=float, default=5.0, help="seconds of make_vec steps per session count")
    parser.add_argument("--hold", type=int, default=10_000, help="OpenEnv-client sockets on one worker of ours")
    args = parser.parse_args(argv)
    rows: list[dict] = []
    with imported_server(ECHO, "bench-openenv-echo", 1, max([*args.sessions, args.hold]) + 100,
                         inline_sync=True) as ours:
        for sessions in args.sessions:
            steps = max(20, args.steps // sessions)
            with openenv_server(ECHO, ours.python, max_sessions=sessions) as (theirs, pid):
                anchor = peer(ours.python, theirs, sessions, steps, pid)
            client_on_ours = peer(ours.python, http(ours.url), sessions, steps, ours.pid)
            vector = asyncio.run(make_vec(ours.url, sessions, args.budget))
            rows.append({"sessions": sessions, "anchor": anchor, "openenv_client_on_ours": client_on_ours,
                         "make_vec_on_ours": vector,
                         "client_ratio": client_on_ours["steps_per_s"] / max(anchor["steps_per_s"], 1e-9),
                         "make_vec_ratio": vector["steps_per_s"] / max(anchor["steps_per_s"], 1e-9)})
            print(f"{sessions:>6} sessions: OpenEnv server+client {anchor['steps_per_s']:,.0f} steps/s "
                  f"({anchor['errors']} errors, {anchor['server_threads_sessions']} server threads) | OpenEnv client "
                  f"on ours {client_on_ours['steps_per_s']:,.0f} ({rows[-1]['client_ratio']:.1f}x, "
                  f"{client_on_ours['errors']} errors, {client_on_ours['server_threads_sessions']} threads) | "
                  f"make_vec on ours {vector['steps_per_s']:,.0f} ({rows[-1]['make_vec_ratio']:.1f}x)", flush=True)
        held = peer(ours.python, http(ours.url), args.hold, 1, ours.pid)
    per_session = (held["server_rss_sessions"] - held["server_rss_idle"]) / max(1, held["sessions_open"])
    print(f"one worker of ours held {held['sessions_open']:,} OpenEnv-client sockets, {held['errors']} errors, "
          f"{held['server_threads_sessions']} server threads, {per_session / 1024:.1f} KiB per session", flush=True)
    result = {"rows": rows, "hold": held | {"server_bytes_per_session": per_session}}
    save_result("openenv_compare", result)
    return result


if __name__ == "__main__":
    main()

"""ORS throughput, one run: an imported ORS environment through openenv_gym, against the same environment
under openreward's own Server driven by its AsyncOpenReward client.

Both sides run `rounds` rounds of `sessions` concurrent episodes (start an episode, call `increment`
until it is finished: ten calls), on this machine; steps/s = tool calls / wall time, episode starts
included. Ours: the environment imported with `openenv-gym import`, served by `openenv-gym serve`
(one worker per core) in its own venv, driven by the async vector client.

    python -m openenv_gym.bench.ors_compare [--sessions 1000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

HERE = Path(__file__).parent
ACTION = {"name": "increment", "arguments": {}}


async def run_ours(url: str, sessions: int, rounds: int) -> dict:
    from openenv_gym.client.vector import AsyncVectorClient

    steps = errors = 0
    async with AsyncVectorClient(url, sessions, request_timeout=600) as client:
        started = time.perf_counter()
        for _ in range(rounds):
            result = await client.reset(seed=0)
            errors += len(result.errors)
            live = list(range(sessions))
            while live:
                result = await client.step([ACTION] * len(live), live)
                steps += len(live)
                errors += len(result.errors)
                live = [env for env, done in zip(live, result.terminated | result.truncated, strict=True) if not done]
        elapsed = time.perf_counter() - started
    return {"steps": steps, "seconds": elapsed, "steps_per_s": steps / elapsed, "errors": errors}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def sdk_server(python: Path, source: Path, entry: str) -> Iterator[str]:
    """The SDK's own Server for `entry` ("module:Class") of `source`, on a loopback port; yields its URL."""
    port = free_port()
    server = subprocess.Popen([str(python), str(HERE / "ors_sdk_server.py"), str(source), entry, str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.2)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)


def run_openreward(python: Path, source: Path, sessions: int, rounds: int) -> dict:
    with sdk_server(python, source, "counter:Counter") as url:
        done = subprocess.run([str(python), str(HERE / "openreward_peer.py"), url, "counter", "--sessions",
                               str(sessions), "--rounds", str(rounds)], capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"the openreward client failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = parser.parse_args(argv)

    from openenv_gym.home import home

    os.environ.setdefault("OPENENV_GYM_VENVS", str(home() / "venvs"))  # reuse built venvs across runs
    with tempfile.TemporaryDirectory() as scratch:
        os.environ["OPENENV_GYM_HOME"] = scratch  # this import stays out of the user's registry
        from openenv_gym.embedded import LocalServer
        from openenv_gym.importers import import_environment
        from openenv_gym.manifest import load_manifest
        from openenv_gym.venvs import ensure_venv

        (imported,) = import_environment(HERE / "ors_counter", "bench-counter", Path(scratch) / "servers")
        python = ensure_venv(load_manifest(imported.folder))
        server = LocalServer(str(imported.folder), args.workers, args.sessions + 100)
        try:
            ours = asyncio.run(run_ours(server.url, args.sessions, args.rounds))
        finally:
            server.stop()
        theirs = run_openreward(python, imported.folder / "vendor", args.sessions, args.rounds)
    result = {"sessions": args.sessions, "rounds": args.rounds, "ours": ours, "openreward": theirs,
              "ratio": ours["steps_per_s"] / theirs["steps_per_s"]}
    print(f"ORS env, {args.sessions:,} concurrent episodes x {args.rounds} rounds (10 tool calls each):")
    print(f"  openenv_gym (imported, served, vector client): {ours['steps_per_s']:>10,.0f} steps/s, "
          f"{ours['errors']} errors")
    print(f"  openreward Server + AsyncOpenReward:            {theirs['steps_per_s']:>10,.0f} steps/s, "
          f"{theirs['errors']} errors")
    print(f"  ours / openreward: {result['ratio']:.1f}x")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "ors_throughput.json").write_text(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()

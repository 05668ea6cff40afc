"""ORS throughput, one run: an imported ORS environment through openenv_gym, against the same environment
under openreward's own Server driven by its AsyncOpenReward client.

Both sides run `sessions` concurrent players, each playing `rounds` episodes back to back (start an
episode, call `increment` until it is finished: ten calls), on this machine; steps/s = tool calls /
wall time, episode starts included. Ours: the environment imported with `openenv-gym import`, served
by `openenv-gym serve` (one worker per core) in its own venv, driven by the async vector client.

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
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from openenv_gym.bench.episodes import imported_server, run_players

HERE = Path(__file__).parent
ACTION = {"name": "increment", "arguments": {}}


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

    with imported_server(HERE / "ors_counter", "bench-counter", args.workers, args.sessions + 100) as served:
        ours = asyncio.run(run_players(served.url, args.sessions, args.rounds, lambda obs: ACTION))
        theirs = run_openreward(served.python, served.folder / "vendor", args.sessions, args.rounds)
    result = {"sessions": args.sessions, "rounds": args.rounds, "ours": ours, "openreward": theirs,
              "ratio": ours["steps_per_s"] / theirs["steps_per_s"]}
    print(f"ORS env, {args.sessions:,} concurrent players x {args.rounds} episodes (10 tool calls each):")
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

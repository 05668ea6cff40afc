"""ORS throughput, one run: an imported ORS environment through openenv_gym, against the same environment
under openreward's own Server driven by its AsyncOpenReward client.

Both sides run `sessions` concurrent players, each playing `rounds` episodes back to back (start an
episode, call `increment` until it is finished: ten calls), on this machine; steps/s = tool calls /
wall time, episode starts included. Ours: the environment imported with `openenv-gym import`, served
by `openenv-gym serve` (one worker per core) in its own venv, driven by the async vector client.

    python -m benchmarks.ors_compare [--sessions 1000] [--rounds 3]
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from benchmarks.episodes import ENVS, comparison_arguments, imported_server, report, run_peer, run_players

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
        return run_peer(python, "benchmarks.openreward_peer", url, "counter", "--sessions", str(sessions),
                        "--rounds", str(rounds))


def main(argv: list[str] | None = None) -> dict:
    args = comparison_arguments(argv, __doc__, sessions=1000)

    with imported_server(ENVS / "ors_counter", "bench-counter", args.workers, args.sessions + 100) as served:
        ours = asyncio.run(run_players(served.url, args.sessions, args.rounds, lambda obs: ACTION))
        theirs = run_openreward(served.python, served.folder / "vendor", args.sessions, args.rounds)
    return report(args, "ORS env (10 tool calls an episode)", ours,
                  ("openreward", "openreward Server + AsyncOpenReward", theirs), "ors_throughput.json")

if __name__ == "__main__":
    main()

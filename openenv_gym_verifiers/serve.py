"""Verifiers' own env server (verifiers 0.4's `serve_env`) on an openenv-gym server's taskset: what `openenv-gym
serve ENV --verifiers-port P` runs, in a venv that holds verifiers.

    python -m openenv_gym_verifiers.serve --address tcp://127.0.0.1:5000 --url ws://127.0.0.1:8000 --workers 2

It prints `ready ADDRESS` once bound (and nothing else on stdout), and stops when its standard input closes (the
lifeline of the server that started it) or on SIGTERM.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading

import verifiers.v1 as vf
from verifiers.v1.serve.pool import env_config_data, serve_env

TASKSET = "openenv_gym_verifiers"


class Announce:
    """Where serve_env reports the address it bound (it takes any object with `put`)."""

    def put(self, address: str) -> None:
        print(f"ready {address}", flush=True)
        os.dup2(2, 1)  # (the rest goes where its errors go: the server's stderr)


def config(url: str) -> vf.EnvConfig:
    """The env config of a server's taskset: its env, its in-process model calls (harness.py), its tasks from the
    run requests (the server never loads the catalog itself)."""
    return vf.resolve_env_config({"taskset": {"id": TASKSET, "url": url, "tasks": []}})


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m openenv_gym_verifiers.serve")
    parser.add_argument("--address", required=True, help="where Verifiers' clients connect (tcp://HOST:PORT)")
    parser.add_argument("--url", required=True, help="the openenv-gym server whose env the runs play")
    parser.add_argument("--workers", type=int, default=1, help="Verifiers' server processes, at most (elastic)")
    parser.add_argument("--max-concurrent", type=int, default=None, help="runs at once per process")
    args = parser.parse_args(argv)
    threading.Thread(target=stop_when_stdin_closes, daemon=True).start()
    serve_env(max_workers=args.workers, address=args.address, address_queue=Announce(),
              config_data=env_config_data(config(args.url)), max_concurrent=args.max_concurrent)


def stop_when_stdin_closes() -> None:
    while sys.stdin.buffer.read(4096):
        pass
    os.kill(os.getpid(), signal.SIGTERM)  # (serve_env's teardown: its workers stop with it)


if __name__ == "__main__":
    main()

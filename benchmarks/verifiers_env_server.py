"""Verifiers' own env server (verifiers 0.4's `serve_env`, what prime-rl's `env-server` runs) on a v1 environment:
the other side of the Verifiers front end's parity tests and benchmark. Run with the env's venv python, from the
repository root:

    python -m benchmarks.verifiers_env_server PROJECT TASKSET_ID --address tcp://127.0.0.1:0 [--workers N]
        [--config '{"second": {"model": "m2"}}']

The env is loaded as benchmarks/verifiers_v1_peer.py loads it (the null harness, Verifiers' subprocess runtime). It
prints `ready ADDRESS` once bound, and stops when its standard input closes or on SIGTERM.
"""

from __future__ import annotations

import argparse
import json
import threading

from verifiers.v1.serve.pool import env_config_data, serve_env

from benchmarks.verifiers_v1_peer import verifiers_config
from openenv_gym_verifiers.serve import Announce, stop_when_stdin_closes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("project")
    parser.add_argument("taskset_id")
    parser.add_argument("--address", default="tcp://127.0.0.1:0")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--max-concurrent", type=int, default=None)
    parser.add_argument("--config", type=json.loads, default=None, help="the env's config, as its env_args say it")
    args = parser.parse_args()
    threading.Thread(target=stop_when_stdin_closes, daemon=True).start()
    serve_env(max_workers=args.workers, address=args.address, address_queue=Announce(), multiplex=128,
              config_data=env_config_data(verifiers_config(args.project, args.taskset_id,
                                                                        config=args.config)),
              max_concurrent=args.max_concurrent)


if __name__ == "__main__":
    main()

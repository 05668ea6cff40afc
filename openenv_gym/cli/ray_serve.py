"""`openenv-gym serve ENV --ray --num-servers N`: the servers as Ray actors (openenv_gym.ray.serve), until Ctrl-C.

Each server listens on its node's address on a free port; the command prints their URLs, and prints them again
when Ray restarts a server elsewhere. `--workers` is per server (default 1): the CPUs each actor reserves.
With `--verifiers-port 0`, each server's Verifiers front end listens on a free port of its node too, and each
line gives its address after the URL.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from typing import Any

from openenv_gym.server.config import ServeConfig

WATCH_PERIOD = 5.0  # seconds between looks at the servers' URLs


def add_ray_options(serve: argparse.ArgumentParser) -> None:
    serve.add_argument("--ray", action="store_true",
                       help="start the servers as Ray actors across a Ray cluster (needs openenv-gym[ray])")
    serve.add_argument("--num-servers", type=int, default=1, help="with --ray: how many servers (default 1)")
    serve.add_argument("--ray-address", default=None,
                       help="with --ray: the cluster to join (default: $RAY_ADDRESS, a running local cluster, or a "
                            "new one on this machine)")


def forwarded_flags(args: argparse.Namespace) -> list[str]:
    """The `openenv-gym serve` flags every server gets."""
    flags = ["--step-timeout", str(args.step_timeout), "--idle-timeout", str(args.idle_timeout),
             "--max-frame-bytes", str(args.max_frame_bytes), "--frame-timeout", str(args.frame_timeout),
             "--resume-window", str(args.resume_window), "--group-timeout", str(args.group_timeout),
             "--max-action-chars", str(args.max_action_chars),
             "--threads", str(args.threads), "--log-level", args.log_level]
    return flags + ["--reveal-tasks"] * args.reveal_tasks + ["--no-web"] * args.no_web + \
        ["--no-sandbox"] * args.no_sandbox + (["--engine", args.engine] if args.engine else [])


def serve_on_ray(args: argparse.Namespace) -> None:
    if args.host != ServeConfig.host or args.port != ServeConfig.port:
        sys.exit("openenv-gym serve: --host and --port do not go with --ray; each server listens on its node's "
                 "address, on a free port, and the URLs are printed")
    if args.verifiers_port not in (None, 0) or args.verifiers_workers is not None:
        sys.exit("openenv-gym serve: with --ray, --verifiers-port is 0 (each server's front end listens on a free port "
                 "of its node; the addresses are printed) and its processes are the server's --workers")
    if args.num_servers < 1:
        sys.exit(f"openenv-gym serve: --num-servers must be at least 1, got {args.num_servers}")
    try:
        from openenv_gym import ray as on_ray
    except ImportError as exc:
        sys.exit(f"openenv-gym serve: {exc}")
    servers = on_ray.serve(args.env, num_servers=args.num_servers, workers_per_server=args.workers or 1,
                           max_sessions=args.max_sessions, env_args=args.env_args, token=args.token,
                           serve_args=forwarded_flags(args), address=args.ray_address,
                           verifiers=args.verifiers_port is not None, max_concurrent=args.max_concurrent)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        urls = _addresses(servers)
        print(f"openenv-gym: serving {args.env} on {len(urls)} Ray actors ({servers.workers_per_server} workers "
              f"each; Ctrl-C stops them all):", *urls, sep="\n  ", flush=True)
        while not stop.wait(WATCH_PERIOD):
            now = _addresses(servers)
            if now != urls:
                print("openenv-gym: the servers are now:", *now, sep="\n  ", flush=True)
                urls = now
    finally:
        servers.shutdown()
        print("openenv-gym: stopped every server and removed their actors", flush=True)


def _addresses(servers: Any) -> list[str]:
    """A line per live server: its URL, and its Verifiers front end's address where it has one."""
    return [" ".join(filter(None, (where["url"], where.get("verifiers")))) for where in servers.where()]

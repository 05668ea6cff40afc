"""The `openenv-gym` command: serve | import | list | bench."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path

from openenv_gym.errors import OpenEnvGymError


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _json_object(text: str) -> dict:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON ({exc}): {text!r}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"must be a JSON object, got {text!r}")
    return value


def _add_serve(commands: argparse._SubParsersAction) -> None:
    serve = commands.add_parser("serve", help="serve an environment over WebSocket",
                                description="Serve an environment: one isolated instance per session.")
    serve.add_argument("env", help="a shipped or imported environment name, or a folder with an openenv.toml")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    serve.add_argument("--port", type=int, default=8000, help="port (0 picks a free one; default 8000)")
    serve.add_argument("--workers", type=_positive_int, default=os.cpu_count() or 1,
                       help="worker processes (default: one per core)")
    serve.add_argument("--max-sessions", type=_positive_int, default=10_000,
                       help="sessions the whole server holds at once (default 10000)")
    serve.add_argument("--token", default=os.environ.get("OPENENV_GYM_TOKEN"),
                       help="require 'Authorization: Bearer TOKEN' (default: $OPENENV_GYM_TOKEN)")
    serve.add_argument("--step-timeout", type=float, default=60.0,
                       help="seconds a reset or step may take before its session is ended (default 60)")
    serve.add_argument("--idle-timeout", type=float, default=900.0,
                       help="seconds an unused session lives before it is reaped (default 900)")
    serve.add_argument("--max-frame-bytes", type=_positive_int, default=16 * 2**20,
                       help="largest request frame; bigger ones get a too_large error (default 16 MiB)")
    serve.add_argument("--threads", type=_positive_int, default=32,
                       help="threads per worker for environments with blocking methods (default 32)")
    serve.add_argument("--env-args", type=_json_object, default={}, metavar="JSON",
                       help="verifiers environments: arguments of load_environment(), a JSON object overriding "
                            "the manifest's env_args (e.g. '{\"max_turns\": 5}')")
    serve.add_argument("--log-level", default="WARNING", help="logging level (default WARNING)")
    serve.add_argument("--exit-with-stdin", action="store_true", help=argparse.SUPPRESS)
    serve.set_defaults(run=_run_serve)


def _run_serve(args: argparse.Namespace) -> None:
    from openenv_gym.manifest import find_manifest
    from openenv_gym.server import Limits, ServeConfig, serve
    from openenv_gym.server.supervisor import exit_when_stdin_closes
    from openenv_gym.venvs import ensure_venv, in_venv, needs_venv, venv_path

    manifest = find_manifest(args.env)
    if needs_venv(manifest) and not in_venv(venv_path(manifest)):
        # run the environment in its own venv, with its own dependencies: the same command, re-executed there
        python = str(ensure_venv(manifest))
        os.execv(python, [python, "-m", "openenv_gym", *sys.argv[1:]])

    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(processName)s %(name)s: %(message)s")
    if args.exit_with_stdin:
        exit_when_stdin_closes()
    limits = Limits(max_sessions=args.max_sessions, step_timeout=args.step_timeout,
                    idle_timeout=args.idle_timeout, max_frame_bytes=args.max_frame_bytes)
    serve(ServeConfig(env=args.env, host=args.host, port=args.port, workers=args.workers,
                      token=args.token, limits=limits, threads=args.threads, env_args=args.env_args))


def _add_import(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "import", help="import an ORS or Verifiers environment (a .py file or a folder) as openenv/<kind>-NAME",
        description="Detect environments in SOURCE by reading it (nothing is run), vendor it without secrets "
                    "or junk, and write NAME/openenv.toml under the output folder.")
    parser.add_argument("source", type=Path, help="a .py file or a folder (a checkout)")
    parser.add_argument("--name", required=True, help="the environment's name: gym id openenv/<kind>-NAME")
    parser.add_argument("--output-dir", type=Path, default=Path("servers"), help="where to write (default ./servers)")
    parser.add_argument("--data", type=Path, nargs="+", default=[], help="data files or folders to copy in")
    parser.add_argument("--env", dest="env_class", help="the class to import when the source holds several")
    parser.add_argument("--force", action="store_true", help="replace an existing NAME; allow shadowing modules")
    parser.set_defaults(run=_run_import)


def _run_import(args: argparse.Namespace) -> None:
    from openenv_gym.importers import import_environment

    for result in import_environment(args.source, args.name, args.output_dir, args.data, args.env_class, args.force):
        print(f"imported {result.detected.entry} ({result.detected.kind}) as {result.gym_id}")
        print(f"  folder: {result.folder}")
        print(f"  copied {len(result.report.copied)} files; dependencies: {', '.join(result.dependencies) or 'none'}")
        for path, why in result.report.left_out:
            print(f"  left out {path}: {why}")
        for note in result.notes:
            print(f"  note: {note}")


def _add_list(commands: argparse._SubParsersAction) -> None:
    listing = commands.add_parser("list", help="list the registered environments")
    listing.set_defaults(run=_run_list)


def _run_list(args: argparse.Namespace) -> None:
    from openenv_gym.manifest import all_manifests

    for manifest in all_manifests():
        print(f"{manifest.gym_id:32} {manifest.description}")


def _add_bench(commands: argparse._SubParsersAction) -> None:
    bench = commands.add_parser("bench", help="throughput against OpenEnv and the wire limit, in one run",
                                add_help=False)
    bench.set_defaults(run=_run_bench)


def _run_bench(args: argparse.Namespace) -> None:
    from openenv_gym.bench.compare import main as bench_main

    bench_main(args.rest)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="openenv-gym", description=__doc__)
    commands = parser.add_subparsers(required=True, metavar="COMMAND")
    _add_serve(commands)
    _add_import(commands)
    _add_list(commands)
    _add_bench(commands)
    return parser


def main(argv: list[str] | None = None) -> None:
    args, rest = build_parser().parse_known_args(argv)
    if rest and args.run is not _run_bench:
        build_parser().error(f"unrecognized arguments: {' '.join(rest)}")
    args.rest = rest
    try:
        args.run(args)
    except OpenEnvGymError as exc:
        sys.exit(f"openenv-gym: {exc}")


if __name__ == "__main__":
    main()

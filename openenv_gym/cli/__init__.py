"""The `openenv-gym` command: serve | import | list | bench | rollout | rescore | venvs | images | view | validate |
doctor. A thin layer over the library."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from openenv_gym.cli.ray_serve import add_ray_options, serve_on_ray
from openenv_gym.cli.renamed import add_renamed
from openenv_gym.errors import OpenEnvGymError
from openenv_gym.sandbox.engines import ENGINES
from openenv_gym.server.config import Limits, ServeConfig

ENGINE_CHOICES = (*ENGINES, "none")


def positive_int(text: str) -> int:
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
    serve.add_argument("--host", default=ServeConfig.host,
                       help=f"address to bind (default {ServeConfig.host}: this machine only)")
    serve.add_argument("--port", type=int, default=ServeConfig.port,
                       help=f"port (0 picks a free one; default {ServeConfig.port})")
    serve.add_argument("--workers", type=positive_int, default=None,
                       help="worker processes (default: one per core; with --ray, per server, default 1)")
    serve.add_argument("--max-sessions", type=positive_int, default=Limits.max_sessions,
                       help=f"sessions the whole server holds at once (default {Limits.max_sessions})")
    serve.add_argument("--token", default=os.environ.get("OPENENV_GYM_TOKEN"),
                       help="require 'Authorization: Bearer TOKEN' (default: $OPENENV_GYM_TOKEN)")
    serve.add_argument("--step-timeout", type=float, default=Limits.step_timeout,
                       help=f"seconds a reset or step may take before its session is ended "
                            f"(default {Limits.step_timeout:g})")
    serve.add_argument("--idle-timeout", type=float, default=Limits.idle_timeout,
                       help=f"seconds an unused session lives before it is reaped (default {Limits.idle_timeout:g})")
    serve.add_argument("--max-frame-bytes", type=positive_int, default=Limits.max_frame_bytes,
                       help=f"largest request frame; bigger ones get a too_large error "
                            f"(default {Limits.max_frame_bytes // 2**20} MiB)")
    serve.add_argument("--frame-timeout", type=float, default=Limits.frame_timeout,
                       help="seconds a frame may stay incomplete (sent in part) before the connection is cut "
                            f"(default {Limits.frame_timeout:g})")
    serve.add_argument("--resume-window", type=float, default=Limits.resume_window,
                       help="seconds the sessions of a dropped connection are kept for its client to resume them "
                            f"(0: end them at once; default {Limits.resume_window:g})")
    serve.add_argument("--group-timeout", type=float, default=Limits.group_timeout,
                       help="seconds the finished episodes of a GRPO group are kept for its client to ask for the "
                            f"group's score (default {Limits.group_timeout:g})")
    serve.add_argument("--max-action-chars", type=positive_int, default=Limits.max_action_chars,
                       help="longest text action; a longer one is answered with an invalid-action observation "
                            f"(default {Limits.max_action_chars:,})")
    serve.add_argument("--threads", type=positive_int, default=ServeConfig.threads,
                       help="threads per worker for environment code that would block the event loop: the plain-def "
                            "methods of python environments, and the plain-def calls (and construction) of ORS "
                            f"environment classes (default {ServeConfig.threads})")
    serve.add_argument("--reveal-tasks", action="store_true",
                       help="list tasks whole, answers included, in GET /tasks and the tasks op (default: their "
                            "hidden parts are left out, as in observations; anyone who reaches the port may list)")
    serve.add_argument("--no-web", action="store_true", help="do not serve the playground page at /web")
    serve.add_argument("--no-sandbox", action="store_true",
                       help="run the programs of agent environments unconfined, seeing the server's files, network "
                            "and processes (default: in a sandbox each; an environment that runs programs is refused "
                            "where no sandbox can be made)")
    serve.add_argument("--engine", choices=ENGINE_CHOICES,
                       help="Harbor tasks and OpenEnv projects imported into images: the container engine that holds "
                            "them (default: the one they were imported with)")
    serve.add_argument("--env-args", type=_json_object, default={}, metavar="JSON",
                       help="verifiers environments: arguments of load_environment(), a JSON object overriding "
                            "the manifest's env_args (e.g. '{\"max_turns\": 5}')")
    serve.add_argument("--log-level", default="WARNING", help="logging level (default WARNING)")
    sampler = serve.add_argument_group("a task sampler shared by rollout workers (POST /sampler)")
    sampler.add_argument("--sampler", choices=("sequential", "uniform", "curriculum", "pools"),
                         help="choose the tasks of rollout workers' groups here, one sampler learning from all of "
                              "their groups (`rollout --sampler server`, openenv_gym.sampling.ServerSampler)")
    sampler.add_argument("--group-size", type=positive_int, default=8,
                         help="with --sampler: the group size G the workers play (default 8)")
    sampler.add_argument("--sampler-split", metavar="SPLIT",
                         help="with --sampler: sample the tasks of this split (default: every split)")
    sampler.add_argument("--sampler-seed", type=int, default=None, help="with --sampler: its seed")
    sampler.add_argument("--sampler-state", metavar="FILE",
                         help="with --sampler: keep its state in FILE (written every few seconds while it learns and "
                              "when the server stops) and start from it when FILE exists")
    front = serve.add_argument_group("Verifiers' env server protocol (verifiers 0.4: prime-rl, Verifiers' EnvClient)")
    front.add_argument("--verifiers-port", type=int, metavar="PORT",
                       help="serve it on this port too (tcp), each run an episode of ENV played against the run's "
                            "inference server; the taskset is openenv_gym_verifiers (docs/trainers.md)")
    front.add_argument("--verifiers-workers", type=positive_int, metavar="N",
                       help="with --verifiers-port: its processes at most, added as runs grow (default: --workers)")
    front.add_argument("--max-concurrent", type=positive_int, metavar="N",
                       help="with --verifiers-port: runs at once per process (default: no bound)")
    add_ray_options(serve)
    serve.add_argument("--exit-with-stdin", action="store_true", help=argparse.SUPPRESS)
    serve.add_argument("--ready-fd", type=int, default=None, help=argparse.SUPPRESS)
    serve.add_argument("--settings", type=_json_object, default=None, help=argparse.SUPPRESS)  # serve() re-run
    serve.set_defaults(run=_run_serve)


def _run_serve(args: argparse.Namespace) -> None:
    from openenv_gym.server.launch import serve

    if args.settings is not None:  # serve() runs itself in an environment's venv this way
        serve(**args.settings)
        return
    if args.verifiers_port is None and (args.verifiers_workers or args.max_concurrent):
        sys.exit("openenv-gym serve: --verifiers-workers and --max-concurrent go with --verifiers-port")
    if args.ray:
        if args.sampler is not None:
            sys.exit("openenv-gym serve: --sampler goes without --ray (each Ray server would hold one of its own); "
                     "openenv_gym.ray.rollouts(sampler=...) shares one sampler among Ray workers")
        serve_on_ray(args)
        return
    if args.num_servers != 1 or args.ray_address is not None:
        sys.exit("openenv-gym serve: --num-servers and --ray-address go with --ray")
    with _sampler_host(args) as sampler_socket:
        _serve(args, serve, sampler_socket)


def _serve(args: argparse.Namespace, serve: Any, sampler_socket: str | None) -> None:
    serve(args.env, host=args.host, port=args.port, workers=args.workers, max_sessions=args.max_sessions,
          token=args.token, step_timeout=args.step_timeout, idle_timeout=args.idle_timeout,
          max_frame_bytes=args.max_frame_bytes, frame_timeout=args.frame_timeout, resume_window=args.resume_window,
          group_timeout=args.group_timeout, max_action_chars=args.max_action_chars, threads=args.threads,
          reveal_tasks=args.reveal_tasks,
          web=not args.no_web, env_args=args.env_args, log_level=args.log_level, ready_fd=args.ready_fd,
          exit_with_stdin=args.exit_with_stdin, sandbox=not args.no_sandbox, engine=args.engine,
          sampler_socket=sampler_socket, verifiers_port=args.verifiers_port, verifiers_workers=args.verifiers_workers,
          max_concurrent=args.max_concurrent)


@contextlib.contextmanager
def _sampler_host(args: argparse.Namespace) -> Iterator[str | None]:
    """The --sampler's host, held by this process while it serves (its socket path; None without --sampler)."""
    if args.sampler is None:
        if args.sampler_state or args.sampler_split:
            sys.exit("openenv-gym serve: --sampler-state and --sampler-split go with --sampler")
        yield None
        return
    from openenv_gym.sampling.host import SamplerHost

    host = SamplerHost(args.sampler, group_size=args.group_size, seed=args.sampler_seed, state_file=args.sampler_state,
                       split=args.sampler_split)
    try:
        yield host.path
    finally:
        host.close()


def _add_import(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "import", help="import an ORS, Verifiers, OpenEnv, Harbor or NeMo Gym environment, or an AWM dataset, as a "
                       "gym id",
        description="Detect environments in SOURCE by reading it (nothing is run): ORS / OpenReward classes, "
                    "Verifiers packages (load_environment), OpenEnv projects, a folder of Agent World Model's "
                    "JSONL files, Harbor task folders, or NeMo Gym resource servers. Vendor the source without secrets "
                    "or junk (AWM: build each world's database), and write NAME/openenv.toml under the output folder. "
                    "The gym id is openenv/ors-NAME, openenv/verifiers-NAME, openenv/NAME (OpenEnv), openenv/awm-NAME, "
                    "openenv/harbor-NAME or openenv/nemo-NAME.")
    parser.add_argument("source", help="a .py file, a folder (a checkout), a folder of AWM JSONL files, a wheel (.whl) "
                                       "or sdist (.tar.gz, .zip), or a package on the package index (name==version, "
                                       "or name), which pip downloads as it is configured here")
    parser.add_argument("--name", required=True, help="the environment's name (see the gym ids above)")
    parser.add_argument("--output-dir", type=Path, default=Path("servers"), help="where to write (default ./servers)")
    parser.add_argument("--data", type=Path, nargs="+", default=[], help="data files or folders to copy in")
    add_renamed(parser, "--env", parser.add_argument(
        "--class", dest="env_class", metavar="CLASS", help="the class to import when the source holds several"))
    parser.add_argument("--force", action="store_true", help="replace an existing NAME; allow shadowing modules")
    parser.add_argument("--scenario", dest="scenarios", nargs="+", metavar="S",
                        help="AWM dataset folders: import only these scenarios")
    parser.add_argument("--server", dest="servers", nargs="+", metavar="S",
                        help="a NeMo Gym checkout: import only these resource servers (folders of resources_servers/)")
    parser.add_argument("--env-args", type=_json_object, default={}, metavar="JSON",
                        help="Verifiers environments: their arguments (load_environment's; a v1 env's config), a JSON "
                             "object written in the manifest and loaded with by the check (data that is local, say)")
    parser.add_argument("--inline-sync", action="store_true",
                        help="OpenEnv environments: their sync reset/step are quick and never block, so run them on "
                             "the event loop rather than in a thread (several times the throughput)")
    parser.add_argument("--engine", choices=ENGINE_CHOICES,
                        help="the container engine that builds images, each episode then played in its image: "
                             "Harbor tasks' (default: $OPENENV_GYM_ENGINE, else the first of docker and podman that "
                             "answers; none: no engine, the images emulated over this machine's root) and OpenEnv "
                             "projects' server/Dockerfile (default: an engine only where the Dockerfile installs "
                             "system packages; else a venv)")
    parser.add_argument("--no-check", dest="check", action="store_false",
                        help="do not load the environment as the server will, in its venv (built then, not at the "
                             "first serve): what would fail there then fails at the first serve")
    parser.set_defaults(run=_run_import)


def _run_import(args: argparse.Namespace) -> None:
    from openenv_gym.adapters.check import sandbox_report
    from openenv_gym.importers import import_environment
    from openenv_gym.importers.packages import local_source
    from openenv_gym.manifests import load_manifest

    def say(status: str) -> None:  # on stderr: stdout is what was imported
        print(status, file=sys.stderr, flush=True)

    with local_source(args.source, say) as source:
        results = import_environment(source.path, args.name, args.output_dir, args.data, args.env_class, args.force,
                                     args.inline_sync, args.scenarios, args.check, imported_from=source.origin,
                                     env_args=args.env_args, servers=args.servers, engine=args.engine, say=say)
    for result in results:
        print(f"imported {result.detected.entry} ({result.detected.kind}) as {result.gym_id}")
        print(f"  folder: {result.folder}")
        print(f"  copied {len(result.report.copied)} files; dependencies: {', '.join(result.dependencies) or 'none'}")
        for path, why in result.report.left_out:
            print(f"  left out {path}: {why}")
        for note in result.notes:
            print(f"  note: {note}")
        report = sandbox_report(load_manifest(result.folder))
        if report is not None:
            print(f"  sandbox: {report}")


def _add_list(commands: argparse._SubParsersAction) -> None:
    listing = commands.add_parser("list", help="list the registered environments")
    listing.set_defaults(run=_run_list)


def _run_list(args: argparse.Namespace) -> None:
    from openenv_gym.manifests import all_manifests

    for manifest in all_manifests():
        print(f"{manifest.gym_id:32} {manifest.description}")


def build_parser() -> argparse.ArgumentParser:
    from openenv_gym.cli.bench import add_bench
    from openenv_gym.cli.doctor import add_doctor
    from openenv_gym.cli.images import add_images
    from openenv_gym.cli.rescore import add_rescore
    from openenv_gym.cli.rollout import add_rollout
    from openenv_gym.cli.validate import add_validate
    from openenv_gym.cli.venvs import add_venvs
    from openenv_gym.cli.view import add_view

    parser = argparse.ArgumentParser(prog="openenv-gym", description=__doc__)
    commands = parser.add_subparsers(required=True, metavar="COMMAND")
    _add_serve(commands)
    _add_import(commands)
    _add_list(commands)
    add_bench(commands)
    add_rollout(commands)
    add_rescore(commands)
    add_venvs(commands)
    add_images(commands)
    add_view(commands)
    add_validate(commands)
    add_doctor(commands)
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    try:
        args.run(args)
    except OpenEnvGymError as exc:
        sys.exit(f"openenv-gym: {exc}")


if __name__ == "__main__":
    main()

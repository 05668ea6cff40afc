"""`openenv-gym venvs list | clean [--all] | build ENV | check ENV`: the virtual environments of imported
environments, and whether an environment loads in its own."""

from __future__ import annotations

import argparse
import json
import subprocess


def add_venvs(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("venvs", help="list or clean the virtual environments of imported environments")
    actions = parser.add_subparsers(required=True, metavar="ACTION")
    listing = actions.add_parser("list", help="each venv: its size, and the environments that use it")
    listing.set_defaults(run=_run_list)
    clean = actions.add_parser("clean", help="remove venvs no registered environment uses, and failed builds")
    clean.add_argument("--all", action="store_true", help="remove every venv (they are rebuilt on next use)")
    clean.set_defaults(run=_run_clean)
    build = actions.add_parser("build", help="build an environment's venv now, not at its first serve (container "
                                             "images, CI)")
    build.add_argument("env", help="an environment name, gym id or folder")
    build.set_defaults(run=_run_build)
    check = actions.add_parser("check", help="load an environment in its venv as the server will, and say what "
                                             "fails (file, line, what to do)")
    check.add_argument("env", help="an environment name, gym id or folder")
    check.add_argument("--json", action="store_true", help="print the problem as one JSON line (null: none)")
    check.set_defaults(run=_run_check)


def _mib(size: int) -> str:
    return f"{size / 2**20:,.0f} MiB"


def _run_list(args: argparse.Namespace) -> None:
    from openenv_gym.manifests import all_manifests
    from openenv_gym.manifests.venvs import list_venvs, venvs_dir

    entries = list_venvs(all_manifests())
    if not entries:
        print(f"no virtual environments in {venvs_dir()}")
        return
    for entry in entries:
        status = ", ".join(entry["envs"]) if entry["envs"] else "unused" if entry["ready"] else "failed or unfinished"
        print(f"{entry['name']:18} {_mib(entry['bytes']):>10}  {status}")
    total = sum(entry["bytes"] for entry in entries)
    print(f"{len(entries)} in {venvs_dir()}, {_mib(total)} in all; `openenv-gym venvs clean` removes the unused")


def _run_clean(args: argparse.Namespace) -> None:
    from openenv_gym.manifests import all_manifests
    from openenv_gym.manifests.venvs import clean_venvs

    removed = clean_venvs(all_manifests(), everything=args.all)
    for entry in removed:
        users = f", used by {', '.join(entry['envs'])}" if entry["envs"] else ""
        print(f"removed {entry['name']} ({_mib(entry['bytes'])}{users})")
    print(f"removed {len(removed)} virtual environments, {_mib(sum(entry['bytes'] for entry in removed))}")


def _run_build(args: argparse.Namespace) -> None:
    from openenv_gym.manifests import find_manifest
    from openenv_gym.manifests.venvs import ensure_venv, needs_venv, venv_path

    manifest = find_manifest(args.env)
    if not needs_venv(manifest):
        print(f"{manifest.name} needs no venv of its own: it runs with openenv-gym's own dependencies")
        return
    ensure_venv(manifest)
    print(f"the venv of {manifest.name} is ready: {venv_path(manifest)}")
    from openenv_gym.importers.loadcheck import check_loads

    needs = check_loads(manifest.folder)
    if needs:
        print(f"{manifest.name} does not load here, for what it needs that is not reachable: {'; '.join(needs)}")
    else:
        print(f"{manifest.name} loads in it as the server will load it")


def _run_check(args: argparse.Namespace) -> None:
    from openenv_gym.manifests import find_manifest
    from openenv_gym.manifests.venvs import ensure_venv, in_venv, needs_venv, venv_path

    manifest = find_manifest(args.env)
    if needs_venv(manifest) and not in_venv(venv_path(manifest)):  # again, in the environment's own venv
        again = [str(ensure_venv(manifest)), "-m", "openenv_gym", "venvs", "check", args.env]
        raise SystemExit(subprocess.run([*again, *(["--json"] if args.json else [])]).returncode)
    from openenv_gym.adapters.check import loading_problem, sandbox_report

    problem = loading_problem(args.env)
    if args.json:
        print(json.dumps(problem))
    elif problem is None:
        print(f"{manifest.name} loads as the server will load it")
        report = sandbox_report(manifest)
        if report is not None:
            print(report)
    else:
        where = f"{problem['where']} ({problem['code']}): " if problem["where"] else ""
        print(f"{manifest.name} does not load: {where}{problem['error']}\n{problem['hint']}")
    if problem is not None:
        raise SystemExit(1)

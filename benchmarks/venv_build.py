"""How long an imported environment takes to become playable the first time: its virtual environment built from a
warm package cache (a venv no other environment has built yet, in a fresh OPENENV_GYM_HOME), and the first
`openenv-gym serve` of it until it answers (the venv built inside it). Run: make bench, or
python -m benchmarks.venv_build [--rounds 3] [--env PATH].

The environment is tests/openenv_envs/tally_env (an OpenEnv project: openenv, fastapi, uvicorn, ...). The cache is
warmed by a first build that is not counted. Goal: the venv in <= 5 s from a warm cache.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.episodes import ROOT
from benchmarks.measures import save_result

DEFAULT_ENV = ROOT / "tests" / "openenv_envs" / "tally_env"


def first_build(env: Path, home: Path) -> float:
    """Seconds to import `env` into a fresh home and build its venv."""
    from openenv_gym.importers import import_environment
    from openenv_gym.manifests import load_manifest
    from openenv_gym.manifests.venvs import ensure_venv

    os.environ["OPENENV_GYM_HOME"] = str(home)
    [result] = import_environment(env, "timed", home / "servers", check=False)
    started = time.perf_counter()
    ensure_venv(load_manifest(result.folder))
    return time.perf_counter() - started


def first_serve(env: Path, home: Path) -> float:
    """Seconds from `openenv-gym serve` of a freshly imported `env` (its venv not built) until it serves."""
    from openenv_gym.client.local import LocalServer
    from openenv_gym.importers import import_environment

    os.environ["OPENENV_GYM_HOME"] = str(home)
    [result] = import_environment(env, "timed", home / "servers", check=False)
    started = time.perf_counter()
    server = LocalServer(str(result.folder), 1, 10)
    seconds = time.perf_counter() - started
    server.stop()
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--env", type=Path, default=DEFAULT_ENV, help="an environment source to import")
    args = parser.parse_args()
    saved = os.environ.get("OPENENV_GYM_HOME")
    try:
        with tempfile.TemporaryDirectory(prefix="venv-build-") as scratch:
            first_build(args.env, Path(scratch) / "warm")  # fills the package cache; not counted
            builds = [first_build(args.env, Path(scratch) / f"build-{k}") for k in range(args.rounds)]
            serves = [first_serve(args.env, Path(scratch) / f"serve-{k}") for k in range(args.rounds)]
    finally:
        if saved is None:
            os.environ.pop("OPENENV_GYM_HOME", None)
        else:
            os.environ["OPENENV_GYM_HOME"] = saved
    result = {"env": str(args.env), "venv_build_s": builds, "first_serve_s": serves,
              "venv_build_s_median": statistics.median(builds), "first_serve_s_median": statistics.median(serves)}
    save_result("venv_build", result)
    print(f"{args.env.name}: venv built from a warm cache in {result['venv_build_s_median']:.1f} s (median of "
          f"{args.rounds}; goal <= 5 s); first serve, venv included, {result['first_serve_s_median']:.1f} s")


if __name__ == "__main__":
    main()

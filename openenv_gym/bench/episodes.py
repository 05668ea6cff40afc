"""What the import comparisons (ORS, Verifiers) share: an imported environment served on loopback, and
rounds of concurrent episodes driven through it by the async vector client with a scripted policy."""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Served:
    url: str  # the openenv_gym server
    python: Path  # the environment venv's python (it also has the environment's own SDK)
    folder: Path  # the imported environment's folder (its vendored source is in folder/vendor)


@contextlib.contextmanager
def imported_server(source: Path, name: str, workers: int, max_sessions: int) -> Iterator[Served]:
    """`openenv-gym import SOURCE` into a scratch home, then `openenv-gym serve` it; stopped on exit."""
    from openenv_gym.home import home

    os.environ.setdefault("OPENENV_GYM_VENVS", str(home() / "venvs"))  # reuse built venvs across runs
    with tempfile.TemporaryDirectory() as scratch:
        os.environ["OPENENV_GYM_HOME"] = scratch  # this import stays out of the user's registry
        from openenv_gym.embedded import LocalServer
        from openenv_gym.importers import import_environment
        from openenv_gym.manifest import load_manifest
        from openenv_gym.venvs import ensure_venv

        (imported,) = import_environment(source, name, Path(scratch) / "servers")
        python = ensure_venv(load_manifest(imported.folder))
        server = LocalServer(str(imported.folder), workers, max_sessions)
        try:
            yield Served(server.url, python, imported.folder)
        finally:
            server.stop()


async def run_rounds(url: str, sessions: int, rounds: int, policy: Callable[[str], Any],
                     task_of: Callable[[int], dict] | None = None) -> dict:
    """`rounds` rounds of `sessions` concurrent episodes, each played to its end with `policy(obs)`.
    task_of(env) gives an env's reset options (envs sharing them are reset in one request)."""
    from openenv_gym.client.vector import AsyncVectorClient

    steps = errors = 0
    groups: dict[str, tuple[dict, list[int]]] = {}
    for env in range(sessions):
        options = task_of(env) if task_of else {}
        groups.setdefault(repr(sorted(options.items())), (options, []))[1].append(env)
    async with AsyncVectorClient(url, sessions, request_timeout=600) as client:
        started = time.perf_counter()
        for _ in range(rounds):
            for options, envs in groups.values():
                client.send_reset(envs, seed=0, options=options)
            result = await client.recv(min_results=sessions)
            errors += len(result.errors)
            obs = dict(zip(result.ids.tolist(), result.obs, strict=True))
            live = sorted(obs)
            while live:
                result = await client.step([policy(obs[env]) for env in live], live)
                steps += len(live)
                errors += len(result.errors)
                obs = dict(zip(live, result.obs, strict=True))
                live = [env for env, done in zip(live, result.terminated | result.truncated, strict=True) if not done]
        elapsed = time.perf_counter() - started
    return {"steps": steps, "seconds": elapsed, "steps_per_s": steps / elapsed, "errors": errors}

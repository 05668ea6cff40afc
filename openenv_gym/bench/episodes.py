"""What the import comparisons (ORS, Verifiers) share: an imported environment served on loopback, and
concurrent players driving episodes through it with the async vector client and a scripted policy."""

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


async def run_players(url: str, sessions: int, rounds: int, policy: Callable[[str], Any],
                      task_of: Callable[[int], dict] | None = None) -> dict:
    """`sessions` concurrent players, each playing `rounds` episodes back to back with `policy(obs)`;
    task_of(env) gives a player's reset options. Driven EnvPool-style (send/recv): each answer is acted
    on as it arrives, so no player waits for the slowest of a batch."""
    from openenv_gym.client.vector import AsyncVectorClient

    steps = errors = 0
    episodes_left = [rounds] * sessions
    playing = [False] * sessions  # False: the env's next answer is a reset's
    async with AsyncVectorClient(url, sessions, request_timeout=600) as client:
        started = time.perf_counter()
        for env in range(sessions):
            client.send_reset([env], seed=0, options=task_of(env) if task_of else None)
        while client.in_flight.any():
            result = await client.recv(min_results=1)
            errors += len(result.errors)
            stepping, actions = [], []
            for env, obs, ended in zip(result.ids.tolist(), result.obs, result.terminated | result.truncated,
                                       strict=True):
                if playing[env]:
                    steps += 1
                    if ended:
                        playing[env] = False
                        episodes_left[env] -= 1
                        if episodes_left[env]:
                            client.send_reset([env], seed=0, options=task_of(env) if task_of else None)
                        continue
                playing[env] = True
                stepping.append(env)
                actions.append(policy(obs))
            if stepping:
                client.send(actions, stepping)
        elapsed = time.perf_counter() - started
    return {"steps": steps, "seconds": elapsed, "steps_per_s": steps / elapsed, "errors": errors}

"""Verifiers' own env-server client against a front end (`serve ENV --verifiers-port P`), as prime-rl's orchestrator
drives one: shared by the tests that check what each kind of env gives through it."""

from __future__ import annotations

import json
import subprocess
from typing import Any

from conftest import ROOT

from openenv_gym.manifests.venvs import ensure_venv
from openenv_gym.server.verifiers_front import front_end_manifest

FRONT_END = ("--verifiers-port", "0")  # a server's arguments for a front end on a free port


def front_end_python() -> str:
    """The python of the front end's venv (made once), which has Verifiers' EnvClient."""
    return str(ensure_venv(front_end_manifest()))


def verifiers_runs(address: str, model_url: str, models: str | list[str], tasks: list | None = None,
                   cancel_after: float | None = None, taskset: tuple | None = None,
                   python: str | None = None) -> list[dict[str, Any]]:
    """Each run as Verifiers' EnvClient got it (benchmarks/verifiers_client.py: its ok, errors and traces), and last
    {"healthy_after": ...}: with `taskset` (project, indices) the runs of a v1 taskset's tasks (with a python that
    loads it), then those of the task_data given, each with the next of `models` in turn."""
    extra = [] if cancel_after is None else ["--cancel-after", str(cancel_after)]
    extra += [] if tasks is None else ["--tasks", json.dumps(tasks)]
    extra += [] if taskset is None else ["--taskset", str(taskset[0]), taskset[0].name, "--indices",
                                         *map(str, taskset[1])]
    models = [models] if isinstance(models, str) else models
    done = subprocess.run([python or front_end_python(), "-m", "benchmarks.verifiers_client", address,
                           "--model-url", model_url, "--model", *models, *extra],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def rewards_of(runs: list[dict[str, Any]]) -> list[float]:
    """The reward of each run's one trace (the health line left out), each run checked to have played."""
    *played, health = runs
    assert health == {"healthy_after": True}
    for run in played:
        assert run.get("ok") and run["traces"][0]["ok"], run
    return [run["traces"][0]["reward"] for run in played]

"""The last step of an import: load what was written as the server will, in the environment's own venv (built now,
once per dependency set, as `serve` would build it), so that whatever `serve` would fail on fails here instead.

The loading itself is the adapters' (adapters/check.py), run as `openenv-gym venvs check FOLDER --json` by the
venv's Python: an import writes data and runs no environment code in its own process.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from openenv_gym.importers.base import ImportFailedError
from openenv_gym.manifests import load_manifest
from openenv_gym.manifests.venvs import VenvBuildError, ensure_venv, needs_venv

# seconds an environment may take to load as a server's worker does (an MCP environment is made once to list its
# tools; a Verifiers v1 taskset reads one task): what takes longer would hold up every server start as well
LOAD_TIMEOUT = 300.0


def check_loads(folder: Path) -> list[str]:
    """What the environment written in `folder` needs that cannot be reached from here, found as it loads, where its
    kind records such needs (its resets are then refused, saying so); ImportFailedError, saying where and what to
    do, where it does not load for any other reason. Nothing: it loads."""
    manifest = load_manifest(folder)
    try:
        python = str(ensure_venv(manifest)) if needs_venv(manifest) else sys.executable
    except VenvBuildError as exc:
        raise ImportFailedError(f"{manifest.name}'s dependencies cannot be installed ({exc.installer} exited with "
                                f"{exc.code}). The end of its log ({exc.log}):\n{exc.tail}\nFix the source's "
                                "dependencies (pyproject.toml or requirements.txt), or pass --no-check to import it "
                                "anyway, and import it again") from None
    command = [python, "-m", "openenv_gym", "venvs", "check", str(folder), "--json"]
    print(f"openenv-gym: loading {manifest.name} as a server would (at most {LOAD_TIMEOUT:g} s; --no-check skips it)",
          file=sys.stderr, flush=True)
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=LOAD_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise ImportFailedError(f"loading {manifest.name} as a server's worker would took longer than {LOAD_TIMEOUT:g} "
                                "s, and every server start would wait as long: does it download something, wait for a "
                                "service, or make every task of a large or endless dataset as it starts? Make it load "
                                "lazily, or pass --no-check to import it anyway") from None
    lines = done.stdout.strip().splitlines()
    try:
        problem = json.loads(lines[-1]) if lines else None
    except json.JSONDecodeError:
        problem = None
    if done.returncode == 0:
        return []
    if isinstance(problem, dict) and problem.get("need") and "needs" in type(manifest).model_fields:
        return [] if problem.get("recorded") else [problem["need"]]
    if not isinstance(problem, dict):
        raise ImportFailedError(f"loading {manifest.name} as the server would failed (exit {done.returncode}):\n"
                                f"{done.stderr[-3000:]}")
    where = f"{problem['where']} ({problem['code']}): " if problem.get("where") else ""
    needs = f" It needs {problem['need']}." if problem.get("need") else ""
    raise ImportFailedError(f"{manifest.name} does not load as `openenv-gym serve` would load it, so it was not "
                            f"imported. {where}{problem['error']}; {problem['hint']}.{needs}")

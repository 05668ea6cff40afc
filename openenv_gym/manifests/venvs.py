"""One virtual environment per dependency set, for imported environments: built on first use, cached.

The venv holds openenv_gym itself and the environment's dependencies (for example `openreward`, or
`verifiers<0.4`), so two environments never share a dependency set. Venvs live in
$OPENENV_GYM_VENVS (default $OPENENV_GYM_HOME/venvs), named by a hash of what they hold.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

from openenv_gym.errors import OpenEnvGymError
from openenv_gym.manifests.discovery import PACKAGE_DIR
from openenv_gym.manifests.home import home
from openenv_gym.manifests.schema import BaseManifest

READY_MARKER = ".openenv-gym-ready"
BUILD_TIMEOUT = 1800.0  # seconds one step of a build (creating the venv, pip install) may take


class VenvBuildError(OpenEnvGymError):
    """Installing an environment's dependencies failed."""


def venvs_dir() -> Path:
    return Path(os.environ.get("OPENENV_GYM_VENVS") or home() / "venvs")


def needs_venv(manifest: BaseManifest) -> bool:
    return bool(manifest.dependencies)


def self_requirement() -> list[str]:
    """How to install this openenv_gym: editable from a checkout, else the same released version."""
    root = PACKAGE_DIR.parent
    if (root / "pyproject.toml").is_file():
        return ["-e", str(root)]
    return [f"openenv-gym=={version('openenv-gym')}"]


def venv_path(manifest: BaseManifest) -> Path:
    key = json.dumps([sorted(manifest.dependencies), self_requirement(), sys.version_info[:2]])
    return venvs_dir() / hashlib.sha256(key.encode()).hexdigest()[:16]


def python_of(venv: Path) -> Path:
    return venv / "bin" / "python"


def in_venv(venv: Path) -> bool:
    return Path(sys.prefix).resolve() == venv.resolve()


def venv_ready(manifest: BaseManifest) -> bool:
    return (venv_path(manifest) / READY_MARKER).exists()


def ensure_venv(manifest: BaseManifest) -> Path:
    """The python of the manifest's venv, built (once, under a file lock) if needed; progress goes to stderr."""
    venv = venv_path(manifest)
    if (venv / READY_MARKER).exists():
        return python_of(venv)
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / f"{venv.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be building the same venv
        if (venv / READY_MARKER).exists():
            return python_of(venv)
        print(f"openenv-gym: building a virtual environment for {manifest.name} with "
              f"{', '.join(manifest.dependencies)} in {venv} (first use only; cached by its dependencies)",
              file=sys.stderr, flush=True)
        steps = [[sys.executable, "-m", "venv", "--clear", str(venv)],
                 [str(python_of(venv)), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                  *self_requirement(), *manifest.dependencies]]
        for command in steps:
            try:
                done = subprocess.run(command, stdout=sys.stderr, stderr=sys.stderr, timeout=BUILD_TIMEOUT)
            except subprocess.TimeoutExpired:
                raise VenvBuildError(f"installing the dependencies of {manifest.name} took longer than "
                                     f"{BUILD_TIMEOUT:g} s; check the network and the package index, "
                                     "and retry") from None
            if done.returncode != 0:
                raise VenvBuildError(
                    f"installing the dependencies of {manifest.name} failed (exit {done.returncode}); the pip "
                    f"output above says why. Fix the requirement in {manifest.folder}/openenv.toml and retry")
        (venv / READY_MARKER).touch()
        print(f"openenv-gym: virtual environment for {manifest.name} ready", file=sys.stderr, flush=True)
    return python_of(venv)

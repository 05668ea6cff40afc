"""The user's openenv_gym home ($OPENENV_GYM_HOME, default ~/.openenv_gym) and its registry of import folders.

registry.toml lists the folders `openenv-gym import` wrote to; `import openenv_gym` registers a gym id
for every environment found in them.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import tomli_w

REGISTRY_FILE = "registry.toml"


def home() -> Path:
    return Path(os.environ.get("OPENENV_GYM_HOME") or Path.home() / ".openenv_gym")


def registered_dirs() -> list[Path]:
    path = home() / REGISTRY_FILE
    try:
        data = tomllib.loads(path.read_text())
    except (FileNotFoundError, tomllib.TOMLDecodeError):
        return []
    return [Path(d) for d in data.get("dirs", []) if isinstance(d, str)]


def record_dir(folder: Path) -> None:
    """Add an import folder to the registry, or move it last: the folder of the latest import is read last, and its
    environments win a gym id that an earlier import's also hold (discovery.all_manifests)."""
    folder = folder.resolve()
    dirs = [d for d in registered_dirs() if d != folder]
    path = home() / REGISTRY_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(tomli_w.dumps({"dirs": [str(d) for d in [*dirs, folder]]}))

"""Environment manifests (`openenv.toml`) and where to find them.

A manifest folder holds the environment's code and an `openenv.toml`:

    name = "echo"            # gym id openenv/echo
    kind = "python"          # which adapter runs it
    entry = "echo:EchoEnv"   # module (inside the folder) and class
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from openenv_gym.errors import EnvNotFoundError, OpenEnvGymError

MANIFEST_FILE = "openenv.toml"
NAME_PATTERN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
PACKAGE_DIR = Path(__file__).resolve().parent


class ManifestError(OpenEnvGymError):
    """An openenv.toml is missing or malformed."""


class Manifest(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)

    name: str = Field(pattern=rf"^{NAME_PATTERN.pattern}$")
    kind: str = "python"
    entry: str = Field(pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
    description: str = ""
    deterministic: bool = False  # same seed and actions give the same episode (checked by check_env)
    folder: Path = Field(exclude=True)

    @property
    def gym_id(self) -> str:
        prefix = "" if self.kind == "python" else f"{self.kind}-"
        return f"openenv/{prefix}{self.name}"


def load_manifest(folder: Path | str) -> Manifest:
    folder = Path(folder).resolve()
    path = folder / MANIFEST_FILE
    try:
        data: dict[str, Any] = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ManifestError(f"{path} does not exist: an environment folder needs an {MANIFEST_FILE}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ManifestError(f"{path} is not valid TOML: {exc}") from None
    try:
        return Manifest(**data, folder=folder)
    except ValidationError as exc:
        raise ManifestError(f"{path} is not a valid manifest:\n{exc}") from None


def shipped_servers_dir() -> Path | None:
    """servers/ of a checkout (editable install), or the copy inside an installed wheel."""
    for candidate in (PACKAGE_DIR.parent / "servers", PACKAGE_DIR / "_servers"):
        if candidate.is_dir():
            return candidate
    return None


def shipped_manifests() -> list[Manifest]:
    root = shipped_servers_dir()
    if root is None:
        return []
    return [load_manifest(path.parent) for path in sorted(root.glob(f"*/{MANIFEST_FILE}"))]


def imported_manifests() -> list[Manifest]:
    """Environments in the folders `openenv-gym import` recorded in the user registry."""
    from openenv_gym.home import registered_dirs

    found = []
    for folder in registered_dirs():
        for path in sorted(folder.glob(f"*/{MANIFEST_FILE}")):
            try:
                found.append(load_manifest(path.parent))
            except ManifestError:
                continue  # a broken import must not stop `import openenv_gym`
    return found


def all_manifests() -> list[Manifest]:
    """Shipped environments, then imported ones (a later one with the same gym id is ignored)."""
    unique: dict[str, Manifest] = {}
    for manifest in [*shipped_manifests(), *imported_manifests()]:
        unique.setdefault(manifest.gym_id, manifest)
    return list(unique.values())


def find_manifest(name_or_path: str | Path) -> Manifest:
    """A manifest by env name or gym id (shipped and imported envs), or by the path of its folder."""
    path = Path(name_or_path)
    if (path / MANIFEST_FILE).is_file():
        return load_manifest(path)
    manifests = all_manifests()
    for manifest in manifests:
        if str(name_or_path) in (manifest.name, manifest.gym_id):
            return manifest
    known = ", ".join(m.name for m in manifests) or "none"
    raise EnvNotFoundError(
        f"no environment named {str(name_or_path)!r} and no {MANIFEST_FILE} in that folder; "
        f"known environments: {known}"
    )

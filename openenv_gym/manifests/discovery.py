"""Where environments are found: the shipped ones (servers/), and the folders `openenv-gym import` recorded."""

from __future__ import annotations

import warnings
from pathlib import Path

from openenv_gym.errors import EnvNotFoundError
from openenv_gym.manifests.home import registered_dirs
from openenv_gym.manifests.schema import MANIFEST_FILE, BaseManifest, ManifestError, load_manifest

PACKAGE_DIR = Path(__file__).resolve().parent.parent


def shipped_servers_dir() -> Path | None:
    """servers/ of a checkout (editable install), or the copy inside an installed wheel."""
    for candidate in (PACKAGE_DIR.parent / "servers", PACKAGE_DIR / "_servers"):
        if candidate.is_dir():
            return candidate
    return None


def shipped_manifests() -> list[BaseManifest]:
    root = shipped_servers_dir()
    if root is None:
        return []
    return [load_manifest(path.parent) for path in sorted(root.glob(f"*/{MANIFEST_FILE}"))]


def imported_manifests() -> list[BaseManifest]:
    """Environments in the folders `openenv-gym import` recorded in the user registry."""
    found = []
    for folder in registered_dirs():
        for path in sorted(folder.glob(f"*/{MANIFEST_FILE}")):
            if path.parent.name.startswith("."):  # an import under way, or one that was killed
                continue
            try:
                found.append(load_manifest(path.parent))
            except ManifestError as exc:  # one broken import must not stop `import openenv_gym`
                warnings.warn(f"openenv_gym: {exc}; that environment is not registered", RuntimeWarning,
                              stacklevel=2)
    return found


# gym ids of no environment of this machine's: they drive running servers (registry.py registers them), each with
# its transport and what it is, said for a person
REMOTE_IDS = {"openenv/ors": ("ors", "the id that drives any ORS server (gym.make('openenv/ors', base_url=..., "
                                     "env=...))"),
              "openenv/remote": ("auto", "the id that drives any running server (gym.make('openenv/remote', "
                                         "base_url=...))")}


_said: set[tuple[str, ...]] = set()  # the clashes warned of in this process


def all_manifests() -> list[BaseManifest]:
    """Shipped environments, then imported ones. Each gym id is one environment's: a shipped one's, else the latest
    import's (the import folder recorded last). One that loses its id to another is not registered, with a warning
    that names both."""
    winners: dict[str, BaseManifest] = {}
    shipped, imported = shipped_manifests(), imported_manifests()
    lost = []
    for manifest in [*shipped, *reversed(imported)]:
        holder = _remote(manifest.gym_id) or _described(winners.get(manifest.gym_id))
        if holder is None:
            winners[manifest.gym_id] = manifest
        else:
            lost.append(f"{manifest.folder} (its gym id {manifest.gym_id} is held by {holder})")
    if lost and tuple(lost) not in _said:  # once, however many: scripts importing into scratch folders leave many
        _said.add(tuple(lost))
        more = f", and {len(lost) - 1} more" if len(lost) > 1 else ""
        warnings.warn(f"openenv_gym: {len(lost)} imported environment(s) not registered: {lost[0]}{more}; import "
                      "again with another --name, or remove the folders no longer wanted", RuntimeWarning,
                      stacklevel=2)
    return [manifest for manifest in [*shipped, *imported] if winners.get(manifest.gym_id) is manifest]


def reserved_holder(gym_id: str) -> str | None:
    """What holds `gym_id` so that no import may take it (a shipped environment, a remote id), said for a person;
    None: an import may take it."""
    return _remote(gym_id) or _described(next((m for m in shipped_manifests() if m.gym_id == gym_id), None))


def _remote(gym_id: str) -> str | None:
    return REMOTE_IDS[gym_id][1] if gym_id in REMOTE_IDS else None


def _is_shipped(manifest: BaseManifest) -> bool:
    shipped = shipped_servers_dir()
    return shipped is not None and manifest.folder.parent == shipped.resolve()


def _described(manifest: BaseManifest | None) -> str | None:
    if manifest is None:
        return None
    how = "the shipped" if _is_shipped(manifest) else "the imported"
    return f"{how} {manifest.kind} environment in {manifest.folder}"


def find_manifest(name_or_path: str | Path) -> BaseManifest:
    """A manifest by env name, gym id or gym id without its namespace ("sums", "openenv/ors-sums",
    "ors-sums"; shipped and imported envs), or by the path of its folder."""
    path = Path(name_or_path)
    if (path / MANIFEST_FILE).is_file():
        return load_manifest(path)
    manifests = all_manifests()
    for manifest in manifests:
        if str(name_or_path) in (manifest.name, manifest.gym_id, manifest.gym_id.partition("/")[2]):
            return manifest
    known = ", ".join(m.name for m in manifests) or "none"
    raise EnvNotFoundError(
        f"no environment named {str(name_or_path)!r} and no {MANIFEST_FILE} in that folder; "
        f"known environments: {known}"
    )

"""Load an environment written against openenv_gym's own interface (manifest kind "python"), its folder imported
as a package of its own (runtime/entries.py)."""

from __future__ import annotations

from openenv_gym.adapters.code import running_code
from openenv_gym.adapters.environment import Environment
from openenv_gym.errors import SandboxUnavailableError
from openenv_gym.manifests.schema import ManifestError, PythonManifest
from openenv_gym.runtime.entries import import_from_folder
from openenv_gym.sandbox import refusal


def import_entry(manifest: PythonManifest) -> object:
    """The object named by the manifest's `entry` ("module:attribute"), from its folder's own package."""
    module_name, attribute = manifest.entry.split(":")
    try:
        return import_from_folder(manifest.name, str(manifest.folder), manifest.entry)
    except ModuleNotFoundError as exc:
        raise ManifestError(f"{manifest.folder}: entry module {module_name!r} not found ({exc})") from exc
    except AttributeError:
        raise ManifestError(f"{manifest.folder}: module {module_name!r} has no {attribute!r}") from None


def load_python_environment(manifest: PythonManifest, endpoint: object = None,
                            sandboxed: bool = True) -> type[Environment]:
    """The environment's class; one that runs code (runs_code), its run_code sandboxed (unless --no-sandbox)."""
    cls = import_entry(manifest)
    if not (isinstance(cls, type) and issubclass(cls, Environment)):
        raise ManifestError(
            f"{manifest.folder}: entry {manifest.entry!r} is not a subclass of openenv_gym.Environment"
        )
    if not manifest.runs_code:
        return cls
    refused = refusal(f"{manifest.name}, an environment that runs code,") if sandboxed else None
    if refused is not None:
        raise SandboxUnavailableError(refused)
    return running_code(cls, manifest, sandboxed)

"""Load an environment written against openenv_gym's own interface (manifest kind "python").

The folder is imported as a package of its own (`_openenv_env_<name>`), so its modules can import
each other relatively and never shadow, or get shadowed by, anything on sys.path.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
from types import ModuleType

from openenv_gym.adapters.environment import Environment
from openenv_gym.manifests.schema import ManifestError, PythonManifest


def package_for_folder(manifest: PythonManifest) -> str:
    """Register the manifest folder as a package and return its name."""
    name = "_openenv_env_" + re.sub(r"\W", "_", manifest.name)
    if name not in sys.modules:
        spec = importlib.util.spec_from_loader(name, loader=None, is_package=True)
        package = importlib.util.module_from_spec(spec)
        package.__path__ = [str(manifest.folder)]
        sys.modules[name] = package
    return name


def import_entry(manifest: PythonManifest) -> object:
    """The object named by the manifest's `entry` ("module:attribute")."""
    module_name, attribute = manifest.entry.split(":")
    package = package_for_folder(manifest)
    try:
        module: ModuleType = importlib.import_module(f"{package}.{module_name}")
    except ModuleNotFoundError as exc:
        raise ManifestError(
            f"{manifest.folder}: entry module {module_name!r} not found ({exc})"
        ) from exc
    try:
        return getattr(module, attribute)
    except AttributeError:
        raise ManifestError(f"{manifest.folder}: module {module_name!r} has no {attribute!r}") from None


def load_python_environment(manifest: PythonManifest) -> type[Environment]:
    cls = import_entry(manifest)
    if not (isinstance(cls, type) and issubclass(cls, Environment)):
        raise ManifestError(
            f"{manifest.folder}: entry {manifest.entry!r} is not a subclass of openenv_gym.Environment"
        )
    return cls

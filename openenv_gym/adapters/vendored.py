"""Load vendored source code by its own module names, without adding anything to sys.path.

Imported sources are often written to be run from their own folder (`from utils import x`). A finder
on sys.meta_path serves exactly the vendored folder's top-level modules; nothing else resolves there.
(The import refused sources whose module names would shadow the standard library or a dependency.)
A source that declares the package it is run as (manifest `package`, an OpenEnv project's `chess_env`) is also
served as that package, the vendored folder being its directory: its modules are `chess_env.server.app`, so
`from ..models import X` and `from chess_env.models import X` work as under the project's own runner, and
`from models import X` still finds the top-level module.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from pathlib import Path

from openenv_gym.manifests.schema import ImportedManifest, ManifestError
from openenv_gym.manifests.sources import top_level_modules


class VendoredFinder(importlib.abc.MetaPathFinder):
    def __init__(self, folder: Path, package: str | None = None) -> None:
        self.folder = folder
        self.package = package
        self.names = top_level_modules(folder)

    def find_spec(self, fullname, path=None, target=None):
        if fullname == self.package:
            return _package_spec(fullname, self.folder)
        if "." in fullname or fullname not in self.names:
            return None  # submodules resolve through their package's __path__ as usual
        return importlib.machinery.PathFinder.find_spec(fullname, [str(self.folder)])


def _package_spec(name: str, folder: Path) -> importlib.machinery.ModuleSpec:
    """The folder as the package `name`: its __init__.py runs if it has one, else it is a namespace package."""
    init = folder / "__init__.py"
    if init.is_file():
        spec = importlib.util.spec_from_file_location(name, init, submodule_search_locations=[str(folder)])
        assert spec is not None
        return spec
    spec = importlib.machinery.ModuleSpec(name, None, is_package=True)
    spec.submodule_search_locations = [str(folder)]
    return spec


def load_vendored(manifest: ImportedManifest, first: str | None = None) -> object:
    """The object named by the manifest's entry ("module:attribute"), from its vendored source; the module `first`
    is imported before it (a project's server app, whose import sets up what its environment needs)."""
    folder = manifest.vendored
    if not any(isinstance(f, VendoredFinder) and f.folder == folder for f in sys.meta_path):
        sys.meta_path.insert(0, VendoredFinder(folder, manifest.package))
    module_name, attribute = manifest.entry.split(":")
    for name in ([first] if first else []) + [module_name]:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            raise ManifestError(
                f"{manifest.folder}: cannot import {name!r} ({exc}); if a dependency is missing, add it to "
                "the source's requirements and import it again") from exc
    try:
        return getattr(module, attribute)
    except AttributeError:
        raise ManifestError(f"{manifest.folder}: module {module_name!r} has no {attribute!r}") from None

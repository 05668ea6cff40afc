"""Load vendored source code by its own module names, without adding anything to sys.path.

Imported sources are often written to be run from their own folder (`from utils import x`). A finder
on sys.meta_path serves exactly the vendored folder's top-level modules; nothing else resolves there.
(The import refused sources whose module names would shadow the standard library or a dependency.)
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from pathlib import Path

from openenv_gym.manifests.schema import ImportedManifest, ManifestError
from openenv_gym.manifests.sources import top_level_modules


class VendoredFinder(importlib.abc.MetaPathFinder):
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.names = top_level_modules(folder)

    def find_spec(self, fullname, path=None, target=None):
        if "." in fullname or fullname not in self.names:
            return None  # submodules resolve through their package's __path__ as usual
        return importlib.machinery.PathFinder.find_spec(fullname, [str(self.folder)])


def load_vendored(manifest: ImportedManifest) -> object:
    """The object named by the manifest's entry ("module:attribute"), from its vendored source."""
    folder = manifest.vendored
    if not any(isinstance(f, VendoredFinder) and f.folder == folder for f in sys.meta_path):
        sys.meta_path.insert(0, VendoredFinder(folder))
    module_name, attribute = manifest.entry.split(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise ManifestError(
            f"{manifest.folder}: cannot import {module_name!r} ({exc}); if a dependency is missing, add it to "
            "the source's requirements and import it again") from exc
    try:
        return getattr(module, attribute)
    except AttributeError:
        raise ManifestError(f"{manifest.folder}: module {module_name!r} has no {attribute!r}") from None

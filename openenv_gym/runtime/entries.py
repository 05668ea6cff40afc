"""An object named "module:attribute" inside an environment's folder, which is imported as a package of its own
(`_openenv_env_<name>`), so that its modules import each other relatively and never shadow, or get shadowed by,
anything on sys.path. Light (importlib only): an episode's program imports its entry this way too."""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys


def folder_package(name: str, folder: str) -> str:
    """Register `folder` as the package of environment `name`; its package name."""
    package = "_openenv_env_" + re.sub(r"\W", "_", name)
    if package not in sys.modules:
        spec = importlib.util.spec_from_loader(package, loader=None, is_package=True)
        module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        module.__path__ = [folder]
        sys.modules[package] = module
    return package


def import_from_folder(name: str, folder: str, entry: str) -> object:
    """The object `entry` ("module:attribute") names in the folder of environment `name`. Raises
    ModuleNotFoundError or AttributeError as importing it would."""
    module_name, attribute = entry.split(":")
    module = importlib.import_module(f"{folder_package(name, folder)}.{module_name}")
    return getattr(module, attribute)

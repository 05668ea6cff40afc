"""What the importers of code share (ORS, Verifiers, OpenEnv): the source is vendored into the environment's
folder without secrets or junk, after a check that none of its top-level modules would shadow the standard
library or a dependency, and the manifest names the entry the importer detected."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement

from openenv_gym.importers.base import Detected, ImportFailedError, ImportOptions, Written
from openenv_gym.importers.deps import declared_description
from openenv_gym.importers.scan import first_docstring_line, parse
from openenv_gym.importers.vendor import vendor
from openenv_gym.manifests.schema import VENDOR_DIR
from openenv_gym.manifests.sources import top_level_modules

# Modules a vendored top-level module must not take the name of (besides the standard library).
RUNTIME_MODULES = {"openenv_gym", "gymnasium", "numpy", "websockets", "orjson", "pydantic", "httpx", "uvloop",
                   "tqdm", "packaging", "tomli_w", "openreward", "ors", "verifiers", "openenv"}


class SourceImporter:
    """The base of the importers of code. Subclasses set kind, looks_for (and takes, if they take more than
    --data) and implement detect and dependencies; notes and manifest_fields when they have some."""

    kind: str
    looks_for: str
    takes: frozenset[str] = frozenset({"data"})

    def detect(self, source: Path) -> list[Detected]:
        raise NotImplementedError

    def dependencies(self, source: Path, detected: Detected) -> list[str]:
        raise NotImplementedError

    def near_miss(self, source: Path) -> str | None:
        return None

    def notes(self, source: Path, detected: Detected) -> list[str]:
        """Things the user should know about this source (changed pins, hazards), printed at import."""
        return []

    def manifest_fields(self, source: Path, detected: Detected, options: ImportOptions) -> dict[str, Any]:
        """The manifest keys of this kind beyond the common ones (an OpenEnv env's Action model, say)."""
        return {}

    def write(self, source: Path, detected: Detected, folder: Path, options: ImportOptions) -> Written:
        shadowed = _shadowed(source, self.dependencies(source, detected))
        if shadowed and not options.force:
            raise ImportFailedError(
                f"the source's top-level modules {', '.join(shadowed)} would shadow standard-library or dependency "
                "modules of the same name; rename them, or pass --force to import anyway")
        report = vendor(source, folder / VENDOR_DIR, options.data)
        fields = {"entry": detected.entry, "description": _description(source, detected), "source": VENDOR_DIR,
                  **self.manifest_fields(source, detected, options)}
        return Written(VENDOR_DIR, fields, report, self.notes(source, detected))


def _shadowed(source: Path, dependencies: list[str]) -> list[str]:
    taken = set(sys.stdlib_module_names) | RUNTIME_MODULES
    taken |= {Requirement(d).name.lower().replace("-", "_") for d in dependencies}
    return sorted(top_level_modules(source) & taken)


def _description(source: Path, found: Detected) -> str:
    """What `openenv-gym list` shows: the source's declared description, else its entry's docstring."""
    tree = parse(found.file)
    return declared_description(source) or (first_docstring_line(tree, found.attribute) if tree else "")

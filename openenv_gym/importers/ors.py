"""Detect ORS / OpenReward environments: top-level classes deriving from the SDK's `Environment`.

Recognised imports: `from M import Environment [as X]` and `import M [as X]` for M in openreward,
openreward.environments, ors, or any of their submodules; bases `X`, `X.Environment`,
`X.environments.Environment`, ... (and subscripted forms). Classes deriving from a detected class in
the same module count too. Nothing is imported or run.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from openenv_gym.importers.base import Detected, ImportOptions
from openenv_gym.importers.deps import declared_dependencies, distribution_name
from openenv_gym.importers.hazards import source_hazards
from openenv_gym.importers.scan import module_name, parsed_files
from openenv_gym.importers.source import SourceImporter

SDK_ROOTS = ("openreward", "ors")
SDK_DISTRIBUTIONS = {"openreward": "openreward", "ors": "ors-sdk"}  # import name -> PyPI name


def _sdk_root(module: str | None) -> str | None:
    if not module:
        return None
    root = module.split(".")[0]
    return root if root in SDK_ROOTS else None


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Subscript):  # Environment[...] or x.Environment[...]
        node = node.value
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _imports(tree: ast.Module) -> tuple[dict[str, str], dict[str, str], list[str]]:
    """(names bound to the SDK's Environment, aliases bound to SDK modules, SDK roots in order)."""
    env_names: dict[str, str] = {}
    module_aliases: dict[str, str] = {}
    roots: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (root := _sdk_root(node.module)):
            roots.append(root)
            for alias in node.names:
                if alias.name == "Environment":
                    env_names[alias.asname or alias.name] = root
                elif alias.name in ("environments", "environment"):
                    module_aliases[alias.asname or alias.name] = root
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if root := _sdk_root(alias.name):
                    roots.append(root)
                    module_aliases[alias.asname or alias.name.split(".")[0]] = root
    return env_names, module_aliases, roots


def _sdk_base(base: ast.expr, env_names: dict[str, str], module_aliases: dict[str, str]) -> bool:
    dotted = _dotted(base)
    if dotted is None:
        return False
    if dotted in env_names:
        return True
    head, _, rest = dotted.partition(".")
    return head in module_aliases and rest.endswith("Environment") and rest.split(".")[-1] == "Environment"


class OrsImporter(SourceImporter):
    kind = "ors"
    looks_for = ("a top-level class deriving from Environment imported from openreward, "
                 "openreward.environments or ors (or their submodules)")

    def detect(self, source: Path) -> list[Detected]:
        found = []
        for path, tree in parsed_files(source):
            env_names, module_aliases, roots = _imports(tree)
            if not env_names and not module_aliases:
                continue
            detected_here: set[str] = set()
            changed = True
            while changed:  # classes deriving from a detected class of the same module count too
                changed = False
                for node in tree.body:
                    if not isinstance(node, ast.ClassDef) or node.name in detected_here:
                        continue
                    if any(_sdk_base(b, env_names, module_aliases) or _dotted(b) in detected_here
                           for b in node.bases):
                        detected_here.add(node.name)
                        changed = True
            ordered_roots = tuple(dict.fromkeys(roots))
            for node in tree.body:
                if isinstance(node, ast.ClassDef) and node.name in detected_here:
                    found.append(Detected(self.kind, module_name(source, path), node.name, path, ordered_roots))
        return found

    def dependencies(self, source: Path, detected: Detected) -> list[str]:
        """The source's declared dependencies, plus the SDK it imports when they do not name one."""
        declared = declared_dependencies(source)
        names = {distribution_name(d) for d in declared}
        if not names & set(SDK_DISTRIBUTIONS.values()) and detected.sdk_modules:
            declared.append(SDK_DISTRIBUTIONS[detected.sdk_modules[0]])
        return declared


    def manifest_fields(self, source: Path, detected: Detected, options: ImportOptions) -> dict[str, Any]:
        return {}

    def notes(self, source: Path, detected: Detected) -> list[str]:
        return source_hazards(source)

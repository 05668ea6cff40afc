"""Detect Prime Intellect Verifiers environments (the classic API): a module with a top-level
`load_environment` that imports `verifiers` (also `verifiers.legacy`, `verifiers.envs.*`).

Classic environments run under `verifiers>=0.1.11,<0.4`: 0.4 no longer contains the classic API, so an
unbounded pin is capped. The v1 Taskset API (0.4) and the pre-0.1.8 API are refused with a message.
Hazards found in the source (hub downloads, API keys, environment variables, unseeded randomness)
are reported at import. Nothing is imported or run.
"""

from __future__ import annotations

import ast
from pathlib import Path

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from openenv_gym.importers.base import Detected, ImportFailedError
from openenv_gym.importers.deps import declared_dependencies
from openenv_gym.importers.hazards import source_hazards
from openenv_gym.importers.scan import module_name, parse, python_files

CLASSIC_RANGE = SpecifierSet(">=0.1.11,<0.4")
CLASSIC_RELEASES = ("0.1.11", "0.1.12", "0.1.14", "0.2.0", "0.2.1", "0.3.0", "0.3.1")


def _imports_verifiers(tree: ast.Module) -> set[str]:
    """The verifiers modules a module imports ("verifiers", "verifiers.v1", ...)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "verifiers"}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "verifiers":
            found.add(node.module or "verifiers")
    return found


def _has_load_environment(tree: ast.Module) -> bool:
    return any(isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == "load_environment"
               for n in tree.body)


def _pre_0_1_8(tree: ast.Module) -> bool:
    """The old override points: is_completed(messages, state)."""
    return any(isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == "is_completed"
               for n in ast.walk(tree))


def classic_requirement(declared: list[str]) -> tuple[str, str | None]:
    """The verifiers requirement to install, and a message when the source's own pin was changed."""
    pins = [Requirement(d) for d in declared if Requirement(d).name.lower() == "verifiers"]
    if not pins:
        return f"verifiers{CLASSIC_RANGE}", "the source does not pin verifiers; using the classic API range"
    pin = pins[0]
    if not any(pin.specifier.contains(v) for v in CLASSIC_RELEASES):
        raise ImportFailedError(
            f"the source pins {pin}, which holds no release of the classic API this importer runs "
            f"({CLASSIC_RANGE}); versions before 0.1.8 had a different API, 0.4 is the v1 Taskset API")
    combined = SpecifierSet(str(pin.specifier)) & CLASSIC_RANGE
    if pin.specifier.contains("0.4.0"):
        return (f"verifiers{combined}", f"capped {pin} at <0.4: verifiers 0.4 no longer contains the classic API "
                "that load_environment() returns, and an unbounded pin would install it")
    return f"verifiers{combined}", None


class VerifiersImporter:
    kind = "verifiers"
    looks_for = "a module with a top-level load_environment() that imports verifiers (the classic API)"

    def detect(self, source: Path) -> list[Detected]:
        found, v1_only = [], False
        for path in python_files(source):
            tree = parse(path)
            if tree is None:
                continue
            imported = _imports_verifiers(tree)
            if not imported:
                continue
            if any(m == "verifiers.v1" or m.startswith("verifiers.v1.") for m in imported):
                v1_only = v1_only or not _has_load_environment(tree)
                continue
            if not _has_load_environment(tree):
                continue
            if _pre_0_1_8(tree):
                raise ImportFailedError(
                    f"{path.name} uses the Verifiers API from before 0.1.8 (is_completed overrides), which is not "
                    "supported; port it to the classic API (0.1.8 to 0.3.x: @vf.stop, env_response -> messages)")
            found.append(Detected(self.kind, module_name(source, path), "load_environment", path, ("verifiers",)))
        if v1_only and not found:
            raise ImportFailedError(
                f"{source} is a Verifiers v1 environment (verifiers.v1 Taskset API, 0.4), which is not supported "
                "yet; only the classic API (load_environment() returning a vf.Environment, 0.1.11 to 0.3.x) is")
        return found

    def dependencies(self, source: Path, detected: Detected) -> list[str]:
        declared = declared_dependencies(source)
        others = [d for d in declared if Requirement(d).name.lower() != "verifiers"]
        requirement, _ = classic_requirement(declared)
        return [*others, requirement]

    def notes(self, source: Path, detected: Detected) -> list[str]:
        _, pin_note = classic_requirement(declared_dependencies(source))
        return ([pin_note] if pin_note else []) + source_hazards(source)

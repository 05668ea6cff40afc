"""Detect Prime Intellect Verifiers environments: the classic API (a module with a top-level `load_environment`
that imports `verifiers`, also `verifiers.legacy`, `verifiers.envs.*`) or v1 (a package that imports
`verifiers.v1` and exports a Taskset: verifiers_v1.py). Which one is chosen by what the source imports.

Classic environments run under `verifiers>=0.1.11,<0.4`: 0.4 no longer contains the classic API, so an
unbounded pin is capped; v1 ones under `verifiers>=0.4,<0.5`. The pre-0.1.8 API is refused with a message.
Hazards found in the source (hub downloads, API keys, environment variables, unseeded randomness)
are reported at import. Nothing is imported or run.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from openenv_gym.importers.base import Detected, ImportFailedError, ImportOptions
from openenv_gym.importers.deps import declared_dependencies
from openenv_gym.importers.hazards import DATASET_RANDOMNESS, source_hazards
from openenv_gym.importers.scan import module_name, parse, parsed_files, python_files
from openenv_gym.importers.source import SourceImporter
from openenv_gym.importers.verifiers_v1 import V1_MODULE, detect_tasksets, imports_v1, v1_requirements

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


STRING_TASKS_FROM = "0.1.14"  # verifiers releases from this one refuse rows whose `task` is a plain string


def plain_string_task_rows(source: Path) -> bool:
    """Whether the source builds rows whose `task` is a plain string: {"task": "greet", ...} or
    {"task": ["a", "b"]} written in its code (verifiers >= 0.1.14 refuse such rows at the first rollout)."""
    for path in python_files(source):
        tree = parse(path)
        for node in ast.walk(tree) if tree is not None else ():
            if isinstance(node, ast.Dict):
                for key, value in zip(node.keys, node.values, strict=True):
                    if isinstance(key, ast.Constant) and key.value == "task" and _strings(value):
                        return True
    return False


def _strings(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    return isinstance(node, ast.List | ast.Tuple) and bool(node.elts) and all(map(_strings, node.elts))


def _release_range(specifier: SpecifierSet) -> list[str]:
    """The classic releases a specifier admits (pre-releases never: none has the classic API whole)."""
    return [v for v in CLASSIC_RELEASES if specifier.contains(v)]


def classic_requirement(declared: list[str], plain_string_tasks: bool = False) -> tuple[str, list[str]]:
    """The verifiers requirement to install (the source's extras kept), and notes on what was changed."""
    pins = [Requirement(d) for d in declared if Requirement(d).name.lower() == "verifiers"]
    extras = f"[{','.join(sorted(pins[0].extras))}]" if pins and pins[0].extras else ""
    specifier = SpecifierSet(str(pins[0].specifier)) if pins else SpecifierSet()
    notes = [] if pins else ["the source does not pin verifiers; using the classic API range"]
    if pins and not _release_range(specifier):
        raise ImportFailedError(
            f"the source pins {pins[0]}, which holds no release of the classic API this importer runs "
            f"({', '.join(CLASSIC_RELEASES)}); versions before 0.1.8 had a different API, 0.4 is the v1 Taskset "
            "API, and pre-releases such as 0.3.2.dev* do not hold the classic API; pin one of those releases")
    combined = specifier & CLASSIC_RANGE
    if specifier.contains("0.4.0"):
        notes.append(f"capped {pins[0] if pins else 'verifiers'} at <0.4: verifiers 0.4 no longer contains the "
                     "classic API that load_environment() returns, and an unbounded pin would install it")
    if plain_string_tasks:
        fitting = [v for v in _release_range(combined) if Version(v) < Version(STRING_TASKS_FROM)]
        if not fitting:
            raise ImportFailedError(
                f"the source builds rows with a plain-string `task` column, which verifiers >= {STRING_TASKS_FROM} "
                f"refuse at the first rollout, and it pins {pins[0]}; pin verifiers==0.1.12 in its dependencies, "
                "or rename the column (or JSON-encode its values) and import it again")
        if _release_range(combined) != fitting:
            combined &= SpecifierSet(f"<{STRING_TASKS_FROM}")
            notes.append(f"capped verifiers at <{STRING_TASKS_FROM}: the source builds rows with a plain-string "
                         f"`task` column, which later releases refuse")
    best = max(_release_range(combined), key=Version)
    if specifier.prereleases:  # the pin names a pre-release, so pip would take the newest one in range
        combined &= SpecifierSet(f"<={best}")
        notes.append(f"capped {pins[0]} at <={best}: pre-releases of verifiers do not hold the classic API")
    return f"verifiers{extras}{combined}", notes


def _is_v1(detected: Detected) -> bool:
    return V1_MODULE in detected.sdk_modules


class VerifiersImporter(SourceImporter):
    kind = "verifiers"
    takes = frozenset({"data", "env_args"})
    looks_for = ("a module with a top-level load_environment() that imports verifiers (the classic API), or a "
                 "package exporting a verifiers.v1 Taskset in its __all__ (v1)")

    def detect(self, source: Path) -> list[Detected]:
        found = []
        for path, tree in parsed_files(source):
            if not _imports_verifiers(tree) or imports_v1(tree) or not _has_load_environment(tree):
                continue
            if _pre_0_1_8(tree):
                raise ImportFailedError(
                    f"{path.name} uses the Verifiers API from before 0.1.8 (is_completed overrides), which is not "
                    "supported; port it to the classic API (0.1.8 to 0.3.x: @vf.stop, env_response -> messages)")
            found.append(Detected(self.kind, module_name(source, path), "load_environment", path, ("verifiers",)))
        return found or detect_tasksets(source, self.kind)

    def dependencies(self, source: Path, detected: Detected) -> list[str]:
        declared = declared_dependencies(source)
        if _is_v1(detected):
            return v1_requirements(declared)
        others = [d for d in declared if Requirement(d).name.lower() != "verifiers"]
        requirement, _ = classic_requirement(declared, plain_string_task_rows(source))
        return [*others, requirement]

    def manifest_fields(self, source: Path, detected: Detected, options: ImportOptions) -> dict[str, Any]:
        given = {"env_args": options.env_args} if options.env_args else {}
        if not _is_v1(detected):
            return given
        package = source.name if source.is_dir() and (source / "__init__.py").is_file() else None
        return {"api": "v1", **({"package": package} if package else {}), **given}

    def notes(self, source: Path, detected: Detected) -> list[str]:
        if _is_v1(detected):
            return source_hazards(source, DATASET_RANDOMNESS)
        _, pin_notes = classic_requirement(declared_dependencies(source), plain_string_task_rows(source))
        return pin_notes + source_hazards(source, DATASET_RANDOMNESS)

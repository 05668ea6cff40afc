"""Detect Verifiers v1 environments (verifiers 0.4): a package that imports `verifiers.v1` and lists, in its
`__all__`, a subclass of `vf.Taskset` (defined in any of its modules, re-exported by its __init__.py as `vf-init`
lays packages out). Nothing is imported or run.
"""

from __future__ import annotations

import ast
from pathlib import Path

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from openenv_gym.importers.base import Detected, ImportFailedError
from openenv_gym.importers.scan import module_name, parsed_files
from openenv_gym.manifests.verifiers_v1 import CHAT_PROGRAM_DEPENDENCIES, VERIFIERS_V1

V1_MODULE = "verifiers.v1"


def imports_v1(tree: ast.Module) -> bool:
    for node in ast.walk(tree):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else []
        if any(name == V1_MODULE or name.startswith(V1_MODULE + ".") for name in names):
            return True
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == "verifiers" \
                and any(a.name == "v1" for a in node.names):
            return True
    return False


def _base_name(node: ast.expr) -> str:
    """`vf.Taskset[...]` -> "Taskset"; `Taskset` -> "Taskset"."""
    if isinstance(node, ast.Subscript):
        node = node.value
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def _exported(tree: ast.Module) -> set[str]:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets) \
                and isinstance(node.value, ast.List | ast.Tuple):
            return {e.value for e in node.value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
    return set()


def package_of(source: Path, init: Path) -> str:
    """The package an __init__.py makes, named as the source is loaded: a source that is itself a package (the
    `<name>/` folder of `vf-init`'s layout) is loaded under its own name, anything else from its folder."""
    if not (source.is_dir() and (source / "__init__.py").is_file()):
        return module_name(source, init)
    inner = module_name(source, init)
    return f"{source.name}.{inner}" if inner else source.name


def detect_tasksets(source: Path, kind: str) -> list[Detected]:
    """Each package exporting one Taskset subclass: Detected(entry "package:Class", sdk_modules ("verifiers.v1",))."""
    trees = dict(parsed_files(source))
    if not any(imports_v1(tree) for tree in trees.values()):
        return []
    tasksets, harnesses = _subclasses(trees, "Taskset"), _subclasses(trees, "Harness")
    found = []
    for path, tree in trees.items():
        if path.name != "__init__.py":
            continue
        exported = sorted(_exported(tree) & tasksets)
        if len(exported) > 1:
            raise ImportFailedError(f"{path} exports {len(exported)} Taskset classes ({', '.join(exported)}); a "
                                    "Verifiers v1 package exports exactly one in __all__")
        if exported:
            found.append(Detected(kind, package_of(source, path), exported[0], path, (V1_MODULE,)))
    if not tasksets and harnesses:
        raise ImportFailedError(f"{source} is a Verifiers v1 harness package ({', '.join(sorted(harnesses))}): a "
                                "program a taskset's agents run, not an environment; import a taskset that uses it "
                                "(its harness id is the package's name)")
    if not found and tasksets:
        raise ImportFailedError(f"{source} defines the Verifiers v1 Taskset {', '.join(sorted(tasksets))} but no "
                                "package lists it in its __init__.py's __all__, as Verifiers' loader requires: add "
                                "__all__ = [\"<TasksetClass>\"] to the package's __init__.py")
    return found


def _subclasses(trees: dict[Path, ast.Module], base: str) -> set[str]:
    """The classes that the v1 modules define on `base` (vf.Taskset[...], Harness, ...)."""
    return {node.name for tree in trees.values() if imports_v1(tree) for node in tree.body
            if isinstance(node, ast.ClassDef) and any(_base_name(b) == base for b in node.bases)}


def v1_requirements(declared: list[str]) -> list[str]:
    """The env's own dependencies, verifiers pinned to the v1 API (its extras kept), and its harness programs'."""
    pins = [Requirement(d) for d in declared if Requirement(d).name.lower() == "verifiers"]
    if pins and not pins[0].specifier.contains("0.4.0", prereleases=True):
        raise ImportFailedError(f"the source pins {pins[0]}, but it is a Verifiers v1 package (verifiers.v1), which "
                                "needs verifiers 0.4: pin verifiers>=0.4,<0.5")
    extras = f"[{','.join(sorted(pins[0].extras))}]" if pins and pins[0].extras else ""
    specifier = (pins[0].specifier if pins else SpecifierSet()) & SpecifierSet(VERIFIERS_V1.removeprefix("verifiers"))
    others = [d for d in declared if Requirement(d).name.lower() != "verifiers"]
    named = {Requirement(d).name.lower() for d in others}
    return [*others, f"verifiers{extras}{specifier}",
            *(d for d in CHAT_PROGRAM_DEPENDENCIES if Requirement(d).name.lower() not in named)]

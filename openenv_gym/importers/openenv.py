"""Detect OpenEnv environment projects: top-level classes deriving from OpenEnv's `Environment` or
`MCPEnvironment`, laid out as `openenv init` scaffolds them (openenv.yaml, models.py, server/app.py,
server/<name>_environment.py) or as the OpenEnv repository's envs/* are.

The Action model is the one the project's server validates with: the second argument of `create_app(...)`
in server/app.py, else the annotation of the class's `step(action)`. Names are resolved through the module's
own imports (relative imports as the vendored folder sees them: `..models` is `models`). Nothing is run.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.version import Version

from openenv_gym.importers.base import Detected, ImportFailedError, ImportOptions
from openenv_gym.importers.deps import declared_dependencies, distribution_name
from openenv_gym.importers.hazards import source_hazards
from openenv_gym.importers.scan import module_name, parse, parsed_files
from openenv_gym.importers.source import SourceImporter

SDK_ROOTS = ("openenv", "openenv_core")  # openenv_core: the package's former name, still a shim in openenv
ENV_BASES = ("Environment", "MCPEnvironment")
APP_FACTORIES = ("create_app", "create_fastapi_app")
SDK_REQUIREMENT = "openenv>=0.10"  # the serialization and MCP API the adapter uses
SDK_VERSION = Version("0.10.0")


def _imported_names(tree: ast.Module) -> dict[str, tuple[str, int, str]]:
    """bound name -> (module, level, name in that module) for every `from M import name [as alias]` of a module."""
    names: dict[str, tuple[str, int, str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                names.setdefault(alias.asname or alias.name, (node.module or "", node.level, alias.name))
    return names


def _is_sdk(module: str, level: int) -> bool:
    return level == 0 and module.split(".")[0] in SDK_ROOTS


def _base_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Subscript):  # Environment[Action, Observation, State]
        node = node.value
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else None


def _environment_classes(tree: ast.Module) -> list[ast.ClassDef]:
    bases = {bound for bound, (module, level, name) in _imported_names(tree).items()
             if _is_sdk(module, level) and name in ENV_BASES}
    found: list[ast.ClassDef] = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and any(_base_name(b) in bases | {c.name for c in found}
                                                  for b in node.bases):
            found.append(node)
    return found


def _class_flag(node: ast.ClassDef, flag: str) -> bool:
    for statement in node.body:
        targets = [statement.target] if isinstance(statement, ast.AnnAssign) else (
            statement.targets if isinstance(statement, ast.Assign) else [])
        value = getattr(statement, "value", None)
        if any(isinstance(t, ast.Name) and t.id == flag for t in targets) and isinstance(value, ast.Constant):
            return bool(value.value)
    return False


class OpenEnvImporter(SourceImporter):
    kind = "openenv"
    takes = frozenset({"data", "inline_sync"})
    looks_for = ("a top-level class deriving from Environment or MCPEnvironment imported from openenv "
                 "(an OpenEnv project: openenv.yaml, models.py, server/app.py)")

    def detect(self, source: Path) -> list[Detected]:
        found = []
        for path, tree in parsed_files(source):
            for node in _environment_classes(tree):
                found.append(Detected(self.kind, module_name(source, path), node.name, path, ("openenv",)))
        return found

    def dependencies(self, source: Path, detected: Detected) -> list[str]:
        """The project's dependencies (pyproject.toml, requirements.txt or server/requirements.txt), with the
        openenv package at a version this adapter runs (openenv-core is its former name)."""
        declared = declared_dependencies(source) or declared_dependencies(source / "server")
        kept = [d for d in declared if distribution_name(d) not in ("openenv", "openenv-core")]
        pinned = [d for d in declared
                  if distribution_name(d) == "openenv" and Requirement(d).specifier.contains(SDK_VERSION)]
        return kept + (pinned[:1] or [SDK_REQUIREMENT])

    def notes(self, source: Path, detected: Detected) -> list[str]:
        notes = source_hazards(source)
        declared = declared_dependencies(source) or declared_dependencies(source / "server")
        replaced = [d for d in declared if distribution_name(d) in ("openenv", "openenv-core")
                    and d not in self.dependencies(source, detected)]
        if replaced:
            notes.append(f"{', '.join(replaced)} replaced by {SDK_REQUIREMENT}: the OpenEnv API openenv_gym serves")
        node = _class_node(detected)
        if node is not None and not _class_flag(node, "SUPPORTS_CONCURRENT_SESSIONS"):
            notes.append(f"{detected.attribute} does not declare SUPPORTS_CONCURRENT_SESSIONS = True: it is served one "
                         "session per worker process (more sessions need more workers); set the flag if its "
                         "instances share no state")
        return notes

    def manifest_fields(self, source: Path, detected: Detected, options: ImportOptions) -> dict[str, Any]:
        return {"action": action_class(source, detected), **app_models(source),
                **({"inline_sync": True} if options.inline_sync else {})}


def _class_node(detected: Detected) -> ast.ClassDef | None:
    tree = parse(detected.file)
    return next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == detected.attribute), None) \
        if tree else None


def _app_call(source: Path) -> tuple[Path, ast.Module, ast.Call] | None:
    """server/app.py's create_app(...) call, with its file and tree."""
    app = source / "server" / "app.py"
    tree = parse(app) if app.is_file() else None
    for node in ast.walk(tree) if tree else ():
        if isinstance(node, ast.Call) and _base_name(node.func) in APP_FACTORIES:
            return app, tree, node  # type: ignore[return-value]
    return None


def _app_argument(found: tuple[Path, ast.Module, ast.Call] | None, source: Path, position: int | None,
                  keyword: str) -> str | None:
    """"module:Class" of a model the create_app(...) call `found` is given (at `position`, or as `keyword`)."""
    if found is None:
        return None
    app, tree, call = found
    argument = call.args[position] if position is not None and len(call.args) > position else next(
        (k.value for k in call.keywords if k.arg == keyword), None)
    return _resolve(source, app, tree, argument.id) if isinstance(argument, ast.Name) else None


def app_models(source: Path) -> dict[str, str]:
    """The models besides the Action that OpenEnv's server of the project publishes at /schema, as create_app(...)
    names them: the Observation (its third argument), and the State and reset observation when given."""
    found = _app_call(source)
    models = {"observation": _app_argument(found, source, 2, "observation_cls"),
              "state": _app_argument(found, source, None, "state_cls"),
              "reset_observation": _app_argument(found, source, None, "reset_observation_cls")}
    return {field: model for field, model in models.items() if model is not None}


def action_class(source: Path, detected: Detected) -> str:
    """"module:Class" of the environment's Action model, as the vendored folder imports it."""
    named = _app_argument(_app_call(source), source, 1, "action_cls")
    if named is not None:
        return named
    node = _class_node(detected)
    for method in node.body if node else ():
        if isinstance(method, ast.FunctionDef | ast.AsyncFunctionDef) and method.name == "step":
            annotated = [a.annotation for a in method.args.args[1:2] if a.annotation is not None]
            if annotated and (name := _base_name(annotated[0])):
                tree = parse(detected.file)
                assert tree is not None
                return _resolve(source, detected.file, tree, name)
    raise ImportFailedError(
        f"cannot tell the Action model of {detected.attribute}: server/app.py has no create_app(Env, Action, "
        "Observation) and step(self, action) is not annotated; add either to the project")


def _resolve(source: Path, path: Path, tree: ast.Module, name: str) -> str:
    """Where `name`, as used in module `path`, is defined: "module:Class" in the vendored folder's terms."""
    if any(isinstance(n, ast.ClassDef) and n.name == name for n in tree.body):
        return f"{module_name(source, path)}:{name}"
    imported = _imported_names(tree)
    if name not in imported:
        raise ImportFailedError(f"{path}: cannot find where {name} comes from (no class or import of that name)")
    module, level, name = imported[name]
    if _is_sdk(module, level):
        return f"{module}:{name}"
    if level:  # relative to the module's package; above the project's top it is the top itself
        package = module_name(source, path).split(".")[:-1]
        package = package[:max(0, len(package) - (level - 1))]
        return f"{'.'.join([*package, module] if module else package)}:{name}"
    parts = module.split(".")
    while parts and not _module_file(source, parts):  # a package-qualified name: guess_env.models -> models
        parts = parts[1:]
    if not parts:
        raise ImportFailedError(f"{path}: {name} comes from {module}, which is neither in the project nor openenv")
    return f"{'.'.join(parts)}:{name}"


def _module_file(source: Path, parts: list[str]) -> bool:
    base = source.joinpath(*parts)
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()

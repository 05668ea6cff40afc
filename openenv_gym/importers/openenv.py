"""Detect OpenEnv environment projects: top-level classes deriving from OpenEnv's `Environment` or
`MCPEnvironment`, laid out as `openenv init` scaffolds them (openenv.yaml, models.py, server/app.py,
server/<name>_environment.py) or as the OpenEnv repository's envs/* are.

The project is loaded as the package it declares (its pyproject.toml's `package-dir = {"chess_env" = "."}`, else
its folder's name when the folder is a package), as OpenEnv runs it, so `from ..models import X`,
`from chess_env.models import X` and `from models import X` all work as under OpenEnv's own runner. The Action
model is the one the project's server validates with: the second argument of `create_app(...)` in server/app.py,
else the annotation of the class's `step(action)`. Names are resolved through the module's own imports, every
binding of a name considered (a try/except chain binds it several times). Nothing is run.
"""

from __future__ import annotations

import ast
import contextlib
import re
import tomllib
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.version import Version

from openenv_gym.importers.base import Detected, ImportFailedError, ImportOptions, Written
from openenv_gym.importers.deps import declared_dependencies, distribution_name, locked_pins
from openenv_gym.importers.hazards import source_hazards
from openenv_gym.importers.openenv_image import DOCKERFILE, built, chosen_engine, installs_system_packages
from openenv_gym.importers.scan import module_name, parse, parsed_files
from openenv_gym.importers.source import SourceImporter

SDK_ROOTS = ("openenv", "openenv_core")  # openenv_core: the package's former name, still a shim in openenv
ENV_BASES = ("Environment", "MCPEnvironment")
APP_FACTORIES = ("create_app", "create_fastapi_app")
SDK_REQUIREMENT = "openenv>=0.10"  # the serialization and MCP API the adapter uses
SDK_VERSION = Version("0.10.0")


Binding = tuple[str, int, str]  # (module, level, name in that module) of `from M import name`


def _imported_names(tree: ast.Module) -> dict[str, list[Binding]]:
    """bound name -> every binding of it by `from M import name [as alias]` in a module, in order: a name may be
    bound in several branches of a try/except chain, of which the first may fail where the project runs."""
    names: dict[str, list[Binding]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                names.setdefault(alias.asname or alias.name, []).append((node.module or "", node.level, alias.name))
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
    """The module's classes that derive from the SDK's Environment (a name is the SDK's base if any of its bindings
    comes from the SDK), or from such a class of the module."""
    bases = {bound for bound, bindings in _imported_names(tree).items()
             if any(_is_sdk(module, level) and name in ENV_BASES for module, level, name in bindings)}
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
    takes = frozenset({"data", "inline_sync", "engine"})
    looks_for = ("a top-level class deriving from Environment or MCPEnvironment imported from openenv "
                 "(an OpenEnv project: openenv.yaml, models.py, server/app.py)")

    def write(self, source: Path, detected: Detected, folder: Path, options: ImportOptions) -> Written:
        """The project vendored; and, where an engine builds its server/Dockerfile, its image built: then it is
        served from there (openenv_image.py), and needs no venv."""
        written = super().write(source, detected, folder, options)
        engine = chosen_engine(source, options.engine)
        if engine is None:
            if installs_system_packages(source):
                written.notes.append(f"its {DOCKERFILE} installs system packages, which its venv cannot hold: import "
                                     "it with --engine docker or podman to serve it from its image")
            return written
        written.fields |= {"engine": engine.name, "image": built(source, engine, options.say, folder)}
        written.notes.append(f"served from its image ({DOCKERFILE}, built with {engine.name}): each session runs the "
                             "project's own server in a sandbox over the image's files")
        written.dependencies = []
        return written

    def detect(self, source: Path) -> list[Detected]:
        """The environment classes, their modules named as the project is loaded: inside the package it declares
        (declared_package), as OpenEnv runs its envs (`uvicorn chess_env.server.app:app`)."""
        package = declared_package(source)
        found = []
        for path, tree in parsed_files(source):
            for node in _environment_classes(tree):
                module = _qualified(module_name(source, path), package)
                found.append(Detected(self.kind, module, node.name, path, ("openenv",)))
        return found

    def dependencies(self, source: Path, detected: Detected) -> list[str]:
        """The project's dependencies (pyproject.toml, requirements.txt or server/requirements.txt), with the
        openenv package at a version this adapter runs (openenv-core is its former name; a pin to OpenEnv's git
        repository is replaced by the release too: the API this adapter speaks, installable from the index)."""
        declared = declared_dependencies(source) or declared_dependencies(source / "server")
        kept = [d for d in declared if distribution_name(d) not in ("openenv", "openenv-core")]
        pinned = [d for d in declared if distribution_name(d) == "openenv" and not Requirement(d).url
                  and Requirement(d).specifier.contains(SDK_VERSION)]
        return kept + (pinned[:1] or [SDK_REQUIREMENT])

    def notes(self, source: Path, detected: Detected) -> list[str]:
        notes = source_hazards(source)
        declared = declared_dependencies(source) or declared_dependencies(source / "server")
        replaced = [d for d in declared if distribution_name(d) in ("openenv", "openenv-core")
                    and d not in self.dependencies(source, detected)]
        if replaced:
            notes.append(f"{', '.join(replaced)} replaced by {SDK_REQUIREMENT}: the OpenEnv API openenv_gym serves")
        pins = locked_pins(source, [d for d in self.dependencies(source, detected)
                                    if distribution_name(d) not in ("openenv", "openenv-core")])
        if pins:
            notes.append(f"installed at the versions its uv.lock pins where they fit {SDK_REQUIREMENT} "
                         f"({', '.join(pins)}), as OpenEnv's runner installs it")
        node = _class_node(detected)
        if node is not None and not _class_flag(node, "SUPPORTS_CONCURRENT_SESSIONS"):
            notes.append(f"{detected.attribute} does not declare SUPPORTS_CONCURRENT_SESSIONS = True: it is served one "
                         "session per worker process (more sessions need more workers); set the flag if its "
                         "instances share no state")
        return notes

    def manifest_fields(self, source: Path, detected: Detected, options: ImportOptions) -> dict[str, Any]:
        package = declared_package(source)
        app, factory = app_module(source, package), app_factory(source, package)
        pins = locked_pins(source, [d for d in self.dependencies(source, detected)
                                    if distribution_name(d) not in ("openenv", "openenv-core")])
        return {"action": action_class(source, detected, package), **app_models(source, package),
                **({"constraints": pins} if pins else {}),
                **({"package": package} if package else {}), **({"app": app} if app else {}),
                **({"factory": factory} if factory and factory != detected.entry else {}),
                **({"inline_sync": True} if options.inline_sync else {})}


def served_from_image(found: list[Detected], source: Path, engine: str | None) -> list[Detected]:
    """`found`, but of an OpenEnv project served from its image only the environment its server serves: the class
    server/app.py's create_app makes (the image runs that app, whichever class a manifest would name)."""
    projects = [d for d in found if d.kind == "openenv"]
    if len(projects) < 2 or chosen_engine(source, engine) is None:
        return found
    app = app_factory(source, declared_package(source))
    served = [d for d in projects if d.entry == app]
    return [d for d in found if d.kind != "openenv"] + served if served else found


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


def _app_argument(found: tuple[Path, ast.Module, ast.Call] | None, source: Path, package: str | None,
                  position: int | None, keyword: str) -> str | None:
    """"module:Class" of a model the create_app(...) call `found` is given (at `position`, or as `keyword`)."""
    if found is None:
        return None
    app, tree, call = found
    argument = call.args[position] if position is not None and len(call.args) > position else next(
        (k.value for k in call.keywords if k.arg == keyword), None)
    return _resolve(source, app, tree, argument.id, package) if isinstance(argument, ast.Name) else None


def app_factory(source: Path, package: str | None) -> str | None:
    """"module:name" of what the project's server makes each session's environment with: create_app(...)'s first
    argument (a class, or a factory function that configures one), when it is a name."""
    found = _app_call(source)
    if found is None:
        return None
    try:
        return _app_argument(found, source, package, 0, "env")
    except ImportFailedError:  # a name the import cannot place: the environment class is made as it is
        return None


def app_models(source: Path, package: str | None) -> dict[str, str]:
    """The models besides the Action that OpenEnv's server of the project publishes at /schema, as create_app(...)
    names them: the Observation (its third argument), and the State and reset observation when given."""
    found = _app_call(source)
    models = {"observation": _app_argument(found, source, package, 2, "observation_cls"),
              "state": _app_argument(found, source, package, None, "state_cls"),
              "reset_observation": _app_argument(found, source, package, None, "reset_observation_cls")}
    return {field: model for field, model in models.items() if model is not None}


def action_class(source: Path, detected: Detected, package: str | None) -> str:
    """"module:Class" of the environment's Action model, as the loaded project imports it."""
    named = _app_argument(_app_call(source), source, package, 1, "action_cls")
    if named is not None:
        return named
    node = _class_node(detected)
    for method in node.body if node else ():
        if isinstance(method, ast.FunctionDef | ast.AsyncFunctionDef) and method.name == "step":
            annotated = [a.annotation for a in method.args.args[1:2] if a.annotation is not None]
            if annotated and (name := _base_name(annotated[0])):
                tree = parse(detected.file)
                assert tree is not None
                return _resolve(source, detected.file, tree, name, package)
    raise ImportFailedError(
        f"cannot tell the Action model of {detected.attribute}: server/app.py has no create_app(Env, Action, "
        "Observation) and step(self, action) is not annotated; add either to the project")


def _resolve(source: Path, path: Path, tree: ast.Module, name: str, package: str | None) -> str:
    """Where `name`, as used in module `path`, is defined: "module:Class" as the project imports it when loaded as
    `package` (or as top-level modules without one): the first of the name's bindings that resolves (in a
    try/except chain, the first branch may name a layout that is not there)."""
    if name in _defined(tree):
        return f"{_qualified(module_name(source, path), package)}:{name}"
    bindings = _imported_names(tree).get(name)
    if not bindings:
        raise ImportFailedError(f"{path}: cannot find where {name} comes from (no class or import of that name)")
    for module, level, original in bindings:
        found = _binding_module(source, path, module, level, package)
        if found is not None:
            return f"{found}:{original}"
    tried = ", ".join("." * level + module for module, level, _ in bindings)
    raise ImportFailedError(f"{path}: {name} comes from {tried}, none of which is in the project or openenv")


def _defined(tree: ast.Module) -> set[str]:
    """The names a module defines at its top level: classes, functions and assigned names."""
    names = {node.name for node in tree.body if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)}
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) \
            else []
        names |= {target.id for target in targets if isinstance(target, ast.Name)}
    return names


def _binding_module(source: Path, path: Path, module: str, level: int, package: str | None) -> str | None:
    """The module a `from M import ...` of module `path` imports, as the loaded project names it; None when it is
    neither the SDK nor in the project (or, relative, above the package's top)."""
    if _is_sdk(module, level):
        return module
    wanted = module.split(".") if module else []
    if level:
        parts = module_name(source, path).split(".")[:-1]  # the importing module's package, inside the project
        if level - 1 > len(parts) and package is not None:
            return None  # beyond the top-level package, as Python refuses it
        parts = parts[:max(0, len(parts) - (level - 1))]  # without a package, the project's top is the top
        target = [*parts, *wanted]
        return _qualified(".".join(target), package) if not target or _module_file(source, target) else None
    if package is not None and wanted[0] == package:  # absolute, through the declared package's name
        return module if len(wanted) == 1 or _module_file(source, wanted[1:]) else None
    return module if _module_file(source, wanted) else None  # a top-level module of the project's folder


def _qualified(module: str, package: str | None) -> str:
    """A module of the project's folder as the project is loaded: inside its package, if it declares one."""
    if package is None:
        return module
    return f"{package}.{module}" if module else package


def _module_file(source: Path, parts: list[str]) -> bool:
    base = source.joinpath(*parts)
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file() or (
        base.is_dir() and any(base.glob("*.py")))


def app_module(source: Path, package: str | None) -> str | None:
    """The module of the project's server app, which its runner imports first (`uvicorn server.app:app`): what
    openenv.yaml's `app` names, else server/app.py; None if there is none."""
    named = None
    with contextlib.suppress(OSError):
        named = re.search(r"(?m)^app:\s*['\"]?([\w.]+)", (source / "openenv.yaml").read_text())
    for module in ([named.group(1)] if named else []) + ["server.app"]:
        if _module_file(source, module.split(".")):
            return _qualified(module, package)
    return None


def declared_package(source: Path) -> str | None:
    """The package the project is run as: the one its pyproject.toml maps to its folder (setuptools'
    `package-dir = {"chess_env" = "."}`, as OpenEnv's envs declare), else the folder's own name when it is a package
    (an __init__.py) with a valid name; None: its modules are top-level, as when run from its folder."""
    try:
        with (source / "pyproject.toml").open("rb") as file:
            setuptools = tomllib.load(file).get("tool", {}).get("setuptools", {})
    except (OSError, tomllib.TOMLDecodeError):
        setuptools = {}
    mapped = setuptools.get("package-dir") or {}
    for name, folder in mapped.items() if isinstance(mapped, dict) else ():
        if folder in (".", "", "./") and name.isidentifier():
            return name
    if source.is_dir() and (source / "__init__.py").is_file() and source.name.isidentifier():
        return source.name
    return None

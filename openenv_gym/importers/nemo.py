"""Import NeMo Gym resource servers: `openenv-gym import RESOURCE_SERVER_DIR_OR_REPO --name NAME [--server S ...]`.

A resource server is a folder `resources_servers/<name>/` of a NeMo Gym checkout (or of the installed `nemo-gym`
package, which ships them):

    app.py                     a SimpleResourcesServer (or GymnasiumServer) subclass: tools, state, /verify
    configs/<name>.yaml        the server instance (its config fields), a paired agent with the datasets
    data/example.jsonl         tasks: each row's responses_create_params holds the input and the tools
    data/example_rollouts.jsonl
    requirements.txt           "-e nemo-gym[dev] @ ../../" (the checkout's own nemo-gym) and its extra packages

Detected by the server class in app.py (its bases followed through the modules of the source it imports). Each
server becomes an environment of kind "nemo" (openenv/nemo-NAME, NAME-<server> where several are imported). Its
folder is vendored as `resources_servers/<name>/`, as its code imports itself, with every other
`resources_servers.<x>` package it imports (a shared base: `resources_servers.gymnasium`). The datasets its configs
name that are present are copied with it (a dataset fetched from elsewhere, such as NeMo's GitLab, is not).

Its venv holds the nemo-gym its requirements ask for: the checkout's version (nemo_gym/package_info.py, or the
installed package's metadata) from PyPI, without the [dev] extra (NeMo's own test tools), on the newest Python
that release accepts; where the machine has only an older patch level of that series, the check is relaxed and
the import says so (manifests/pythons.py; nemo_requirements.py). The model servers its config calls (an LLM judge, a
user simulator) are recorded, to be answered by the judge endpoint a server is given; what else it needs that
cannot be reached from here (a sandbox provider, a web API) is recorded too, and a reset says it (nemo_needs.py).
"""

from __future__ import annotations

import ast
import shutil
from dataclasses import dataclass
from pathlib import Path

from openenv_gym.importers.base import Detected, ImportFailedError, ImportOptions, Written, need_note
from openenv_gym.importers.nemo_config import dataset_file, instances, server_config, yaml_blocks
from openenv_gym.importers.nemo_needs import agent_built_prompts, model_servers, unreachable_needs
from openenv_gym.importers.nemo_requirements import PACKAGE, PROJECT, VENDORED, requirements
from openenv_gym.importers.vendor import VendorReport, vendor
from openenv_gym.manifests.judge_endpoint import HOW_TO_GIVE
from openenv_gym.manifests.pythons import NoFittingPythonError, choose
from openenv_gym.runtime.pyparse import parse as parse_python

SERVER_BASES = {"SimpleResourcesServer": "resources", "GymnasiumServer": "gymnasium"}


@dataclass(frozen=True)
class Server:
    folder: Path  # .../resources_servers/<name>
    root: Path | None  # the checkout (or site-packages) holding resources_servers/, when there is one
    cls: str
    protocol: str
    entrypoint: str = "app.py"  # the file its config runs (aviary's: gsm8k_app.py)

    @property
    def module(self) -> str:
        return f"{PACKAGE}.{self.folder.name}.{Path(self.entrypoint).with_suffix('').as_posix().replace('/', '.')}"


def _base_names(node: ast.ClassDef) -> list[str]:
    """The names of a class's bases: `Base`, `module.Base`, and a generic one's, `Base[Env, Dataset]` (aviary's)."""
    bases = [base.value if isinstance(base, ast.Subscript) else base for base in node.bases]
    return [base.id if isinstance(base, ast.Name) else base.attr for base in bases
            if isinstance(base, ast.Name | ast.Attribute)]


def _abstract(node: ast.ClassDef) -> bool:
    """Whether a class is a base to derive servers from: an ABC, or one with abstract methods."""
    return "ABC" in _base_names(node) or any(
        isinstance(decorator, ast.Name | ast.Attribute) and ast.unparse(decorator).endswith("abstractmethod")
        for method in node.body if isinstance(method, ast.FunctionDef | ast.AsyncFunctionDef)
        for decorator in method.decorator_list)


def _module_file(root: Path | None, module: str) -> Path | None:
    """The file of a `resources_servers...` module inside the source, if it is there."""
    if root is None or not module.startswith(f"{PACKAGE}."):
        return None
    path = root.joinpath(*module.split("."))
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _protocols(file: Path, root: Path | None, seen: set[Path]) -> dict[str, str]:
    """{class name: protocol} of the server classes a module defines or imports (followed through the source)."""
    seen.add(file)
    try:
        tree = parse_python(file.read_text(errors="replace"))
    except SyntaxError:
        return {}
    known = dict(SERVER_BASES)
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            imported = _module_file(root, node.module)
            if imported is not None and imported not in seen:
                theirs = _protocols(imported, root, seen)
                known.update({alias.asname or alias.name: theirs[alias.name] for alias in node.names
                              if alias.name in theirs})
        elif isinstance(node, ast.ClassDef):
            protocol = next((known[name] for name in _base_names(node) if name in known), None)
            if protocol is not None:
                known[node.name] = protocol
    return known


def _entrypoint(folder: Path) -> str:
    """The file the server's first instance in its configs runs (app.py unless it says another)."""
    try:
        blocks = yaml_blocks(folder)
    except ImportFailedError:
        return "app.py"
    return next((fields["entrypoint"] for _, fields in instances(blocks, folder.name)
                 if isinstance(fields.get("entrypoint"), str)), "app.py")


def find_server(folder: Path) -> Server | None:
    """The resource server of a folder: the most derived server class the file its config runs defines."""
    if not (folder / "configs").is_dir():
        return None
    entrypoint = _entrypoint(folder)
    app = folder / entrypoint
    if not app.is_file() or folder.resolve() not in app.resolve().parents:
        return None
    root = folder.parent.parent if folder.parent.name == PACKAGE else None
    known = _protocols(app, root, set())
    try:
        tree = parse_python(app.read_text(errors="replace"))
    except SyntaxError:
        return None
    defined = [node for node in tree.body if isinstance(node, ast.ClassDef) and node.name in known
               and node.name not in SERVER_BASES and not _abstract(node)]  # (resources_servers/gymnasium: a base)
    used_as_base = {name for node in defined for name in _base_names(node)}
    leaves = [node.name for node in defined if node.name not in used_as_base]
    if not leaves:
        return None
    return Server(folder, root, leaves[-1], known[leaves[-1]], entrypoint)


def servers_in(source: Path) -> list[Server]:
    """The resource servers of a source: the folder itself, or every server folder of a checkout."""
    if not source.is_dir():
        return []
    own = find_server(source)
    if own is not None:
        return [own]
    folder = source / PACKAGE if (source / PACKAGE).is_dir() else source if source.name == PACKAGE else None
    if folder is None:
        return []
    return [server for child in sorted(folder.iterdir()) if child.is_dir() and (server := find_server(child))]


# -- the importer ------------------------------------------------------------------------------------------------


def _imported_packages(folder: Path) -> set[str]:
    """The `resources_servers.<x>` packages the Python files of a folder import."""
    found = set()
    for path in folder.rglob("*.py"):
        try:
            tree = parse_python(path.read_text(errors="replace"))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            names = [node.module] if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 else \
                [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            found |= {name.split(".")[1] for name in names if name.startswith(f"{PACKAGE}.")}
    return found


class NemoImporter:
    kind = "nemo"
    looks_for = (f"a NeMo Gym resource server (a folder with app.py defining a SimpleResourcesServer or "
                 f"GymnasiumServer subclass, and configs/), or a checkout with {PACKAGE}/")
    takes = frozenset({"servers"})

    def detect(self, source: Path) -> list[Detected]:
        return [Detected(self.kind, server.module, server.cls, server.folder / server.entrypoint,
                         label=server.folder.name) for server in servers_in(source)]

    def near_miss(self, source: Path) -> str | None:
        if source.is_dir() and (source / "app.py").is_file() and "ResourcesServer" in (source / "app.py").read_text(
                errors="replace") and not (source / "configs").is_dir():
            return f"{source} has a resource server's app.py and no configs/ folder with its instance's YAML"
        if source.is_dir() and (source / "configs").is_dir() and find_server(source) is None:
            try:
                declared = instances(yaml_blocks(source), source.name)
            except ImportFailedError:
                return None
            if declared:  # (resources_servers/gymnasium, sec_local_index: what servers derive from or import)
                return (f"its configs declare a resource server, and {_entrypoint(source)} defines none that could "
                        "run (a concrete SimpleResourcesServer or GymnasiumServer subclass): it is a base or a "
                        "library that NeMo Gym's servers use, not a server")
        return None

    def _server(self, detected: Detected) -> Server:
        server = find_server(detected.file.parent)
        assert server is not None, "detected servers are found again"
        return server

    def dependencies(self, source: Path, detected: Detected) -> list[str]:
        return requirements(self._server(detected)).packages

    def write(self, source: Path, detected: Detected, folder: Path, options: ImportOptions) -> Written:
        server = self._server(detected)
        wanted = requirements(server)
        try:
            python = choose(wanted.requires_python, f"{PROJECT} {wanted.nemo_gym}")
        except NoFittingPythonError as exc:
            raise ImportFailedError(str(exc)) from None
        paired = server_config(server)
        instance, config, datasets = paired.instance, paired.fields, paired.datasets
        report = VendorReport()
        notes = list(wanted.notes)
        packages, pending = set(), [server.folder.name]
        while pending:  # the server's own package and every resources_servers package it imports
            name = pending.pop()
            if name in packages:
                continue
            packages.add(name)
            here = server.folder.parent / name
            if not here.is_dir():  # (the nemo-gym package ships resources_servers: its own is imported there)
                notes.append(f"{PACKAGE}.{name}, which it imports, is not in the source: the one of the installed "
                             f"{PROJECT} is used")
                continue
            part = vendor(here, folder / VENDORED / name)
            report.copied += [Path(PACKAGE) / name / path for path in part.copied]
            report.left_out += part.left_out
            pending += sorted(_imported_packages(here) - packages)
        splits: dict[str, str] = {}
        for dataset in datasets:
            name, path = str(dataset.get("name") or dataset.get("type") or "example"), dataset_file(server, dataset)
            if path is None:
                notes.append(f"dataset {name!r} ({dataset.get('jsonl_fpath')}) is not in the source (NeMo Gym "
                             "fetches it from elsewhere): not offered")
            elif name not in splits:
                target = Path("data") / f"{name}.jsonl"
                (folder / target).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, folder / target)
                splits[name] = str(target)
        example = server.folder / "data" / "example.jsonl"
        if not splits and example.is_file():  # (configs that name no dataset the server has: NeMo's example set)
            (folder / "data").mkdir(parents=True, exist_ok=True)
            shutil.copyfile(example, folder / "data" / "example.jsonl")
            splits["example"] = "data/example.jsonl"
            notes.append("its configs name no dataset that is here: its data/example.jsonl is split 'example'")
        if not splits:
            raise ImportFailedError(f"{server.folder}: none of its datasets is in the source (looked for "
                                    f"{', '.join(str(d.get('jsonl_fpath')) for d in datasets) or 'data/*.jsonl'})")
        note = python.note(f"{PROJECT} {wanted.nemo_gym}", wanted.requires_python)
        notes += [note] if note else []
        needs = unreachable_needs(server, config) + agent_built_prompts(folder, splits, paired.agents)
        notes += map(need_note, needs)
        called = model_servers(config)
        if called:
            notes.append(f"its config calls model servers ({', '.join(f'{k}: {v}' for k, v in called.items())}): "
                         f"served by the judge endpoint the server is given ({HOW_TO_GIVE}), else its resets are "
                         "refused")
        fields = {"entry": detected.entry, "source": "vendor", "protocol": server.protocol, "instance": instance,
                  "server_config": config, "splits": splits, "needs": needs, "model_servers": called,
                  "python": python.interpreter.series, "python_resolve_as": python.resolve_as,
                  "description": str(config.get("description") or f"NeMo Gym resource server {server.folder.name}"),
                  **({"max_steps": paired.max_steps} if paired.max_steps else {}),
                  **({"simulated_tools": True} if paired.simulated_tools else {})}
        return Written("vendor", fields, report, notes)

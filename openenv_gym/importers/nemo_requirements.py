"""Which nemo-gym a NeMo Gym resource server runs on, and what else its venv holds (importers/nemo.py imports it).

Its requirements.txt (else its pyproject.toml's dependencies, their [tool.uv.sources] read as URLs) says:
`-e nemo-gym[dev] @ ../../` (or `-e ../../`) is the checkout's own nemo-gym (the installed package, where
`../../` is the site-packages it lies in), whose version
its nemo_gym/package_info.py gives (or the installed package's metadata, for a server the package ships), installed
from PyPI without the [dev] extra; a pin says its version; URLs go to the installer as they are; a path inside the
server's folder (`-e ./pocketshell[pcre]`: a package vendored with it) is installed from the copy the import vendors;
other paths are refused. requires-python comes with the version, from the same place, else from what the releases
declared.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from email.parser import Parser
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.requirements import InvalidRequirement, Requirement

from openenv_gym.importers.base import ImportFailedError
from openenv_gym.runtime.pyparse import parse as parse_python

if TYPE_CHECKING:
    from openenv_gym.importers.nemo import Server

PROJECT = "nemo-gym"
PACKAGE = "resources_servers"  # NeMo Gym's package of resource servers, each server a folder of it
VENDORED = f"vendor/{PACKAGE}"  # where an import puts the servers' folders, in the env's folder
NAME_END = re.compile(r"[\s\[@=<>!~;]")  # what ends a requirement's name
# nemo-gym's requires-python by release, for a version whose metadata is not at hand (its pyproject.toml at each tag)
REQUIRES_PYTHON = [("0.5.0", ">=3.13.14"), ("0.0.0", ">=3.12")]


def _package_info_version(root: Path) -> str | None:
    """A checkout's version, from nemo_gym/package_info.py (MAJOR, MINOR, PATCH, PRE_RELEASE)."""
    info = root / "nemo_gym" / "package_info.py"
    if not info.is_file():
        return None
    values: dict[str, Any] = {}
    for node in parse_python(info.read_text()).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                values[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                continue
    parts = [values.get(key) for key in ("MAJOR", "MINOR", "PATCH")]
    if not all(isinstance(part, int) for part in parts):
        return None
    return ".".join(map(str, parts)) + str(values.get("PRE_RELEASE") or "")


def _installed_metadata(root: Path) -> tuple[str, str | None] | None:
    """(version, requires-python) of the nemo-gym installed where `root` (site-packages) is."""
    for info in sorted(root.glob("nemo_gym-*.dist-info")):
        metadata = Parser().parsestr((info / "METADATA").read_text(errors="replace"))
        return metadata["Version"], metadata["Requires-Python"]
    return None


def _pyproject(root: Path) -> dict[str, Any]:
    """A folder's pyproject.toml (empty where it has none that reads)."""
    import tomllib

    try:
        return tomllib.loads((root / "pyproject.toml").read_text())
    except (OSError, tomllib.TOMLDecodeError):
        return {}


def _pyproject_project(root: Path) -> dict[str, Any]:
    return _pyproject(root).get("project", {})


def _pyproject_lines(folder: Path) -> list[str]:
    """A server's pyproject.toml dependencies as requirements.txt lines (servers with no requirements.txt): where
    [tool.uv.sources] says one comes from git, a URL or a path, the line says so."""
    document = _pyproject(folder)
    sources = document.get("tool", {}).get("uv", {}).get("sources", {})
    lines = []
    for dependency in document.get("project", {}).get("dependencies", []):
        name = NAME_END.split(dependency, maxsplit=1)[0]
        source = sources.get(name) or sources.get(name.replace("_", "-"))
        if not isinstance(source, dict) or _is_project(name):
            lines.append(dependency)  # (nemo-gym's path is the checkout: its version is the checkout's)
        elif "git" in source:
            revision = source.get("rev") or source.get("tag") or source.get("branch")
            lines.append(f"{name} @ git+{source['git']}{'@' + revision if revision else ''}")
        else:
            lines.append(f"{name} @ {source.get('url') or source.get('path')}")
    return lines


def _is_project(name: str) -> bool:
    """Whether a requirement's name is nemo-gym's, however spelled (nemo_gym, NeMo-Gym)."""
    return name.replace("_", "-").lower() == PROJECT


def _pyproject_requires_python(root: Path) -> str | None:
    project = _pyproject_project(root)
    return project.get("requires-python") if project.get("name") == PROJECT else None


def _is_nemo_gym(folder: Path) -> bool:
    """Whether a folder is nemo-gym's: a checkout of it, or the site-packages its package is installed in (where
    its resource servers lie, `../../` from each)."""
    return _pyproject_project(folder).get("name") == PROJECT or _installed_metadata(folder) is not None


def _in_folder(line: str, server: Server, listed: Path) -> str:
    """A path requirement (`./pocketshell[pcre]`, `name @ ./x`) as the env's dependency on the vendored copy of what
    it names (`./vendor/resources_servers/<server>/pocketshell[pcre]`, installed from the env's folder), where that
    lies inside the server's folder, which the import takes along; else ImportFailedError."""
    path = line.split(" @ ", 1)[-1].strip().removeprefix("file:")
    path, bracket, extras = path.partition("[")
    target = (server.folder / path).resolve()
    if server.folder.resolve() not in target.parents or not target.exists():
        raise ImportFailedError(f"{listed}: {line!r} names a path outside the server's folder, which the import "
                                "cannot take along; put what it names on the package index, or a URL of it, in its "
                                "place")
    relative = target.relative_to(server.folder.resolve()).as_posix()
    return f"./{VENDORED}/{server.folder.name}/{relative}{bracket}{extras}"


def requires_python(version: str) -> str:
    from packaging.version import Version

    return next(spec for since, spec in REQUIRES_PYTHON if Version(version) >= Version(since))


def source_nemo_gym(server: Server) -> tuple[str, str] | None:
    """(version, requires-python) of the nemo-gym the server's source comes with: its checkout's, or the installed
    package's it lies in."""
    if server.root is None:
        return None
    installed = _installed_metadata(server.root)
    if installed is not None:
        return installed[0], installed[1] or requires_python(installed[0])
    version = _package_info_version(server.root)
    if version is None:
        return None
    return version, _pyproject_requires_python(server.root) or requires_python(version)


@dataclass
class Requirements:
    packages: list[str]
    nemo_gym: str  # the version installed
    requires_python: str
    notes: list[str]


def requirements(server: Server) -> Requirements:
    """What the server's requirements.txt (else its pyproject.toml's dependencies) asks for, as installable
    requirements."""
    notes: list[str] = []
    packages: list[str] = []
    pinned: str | None = None
    listed = server.folder / "requirements.txt"
    if not listed.is_file() and (server.folder / "pyproject.toml").is_file():
        listed = server.folder / "pyproject.toml"
        lines = _pyproject_lines(server.folder)
    else:
        lines = listed.read_text().splitlines() if listed.is_file() else []
    for raw in lines:
        line = raw.split(" #")[0].strip()
        if not line or line.startswith("#"):
            continue
        editable = line.removeprefix("-e").strip()
        name = NAME_END.split(editable, maxsplit=1)[0]
        if name.startswith((".", "/")) and _is_nemo_gym(server.folder / name):  # "-e ../../": the checkout itself
            continue
        if _is_project(name):
            try:
                requirement = Requirement(editable)
            except InvalidRequirement:
                requirement = None
            if requirement is not None and not requirement.url and str(requirement.specifier).startswith("=="):
                pinned = str(requirement.specifier)[2:]
            if requirement is not None and requirement.extras:
                notes.append(f"{listed.name} asks for {PROJECT}[{','.join(sorted(requirement.extras))}]: the "
                             f"extras are NeMo Gym's own development tools, not installed")
            continue
        if editable.startswith("-"):
            raise ImportFailedError(f"{listed}: {line!r} is an installer's option, which the import does not take: "
                                    "list the requirements themselves")
        if line.startswith(("-", ".", "/")) or "@ ." in line or "@ file:" in line:
            packages.append(_in_folder(editable, server, listed))
            continue
        packages.append(line)  # (a name, or a URL: git+https://..., a wheel's; the venv build fetches it)
    found = source_nemo_gym(server)
    if pinned is not None:
        version, python = pinned, requires_python(pinned)
    elif found is not None:
        version, python = found
    else:
        raise ImportFailedError(f"{server.folder}: which nemo-gym it runs on is not said: its {listed.name} pins "
                                f"none, and it lies outside a NeMo Gym checkout; add '{PROJECT}==0.7.0' (say) to it")
    return Requirements([f"{PROJECT}=={version}", *packages], version, python, notes)

"""What a source declares about itself: its dependencies and description.

Dependencies come from pyproject.toml's [project] table when it lists them; else from the metadata of a built
package (a wheel's `*.dist-info/METADATA`, an sdist's `PKG-INFO`, setuptools' `*.egg-info`), as pip would
install it; else from requirements.txt.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable
from importlib.metadata import Distribution
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement


def _parsed(lines: Iterable[str]) -> list[str]:
    kept = []
    for line in lines:
        try:
            kept.append(str(Requirement(line)))
        except InvalidRequirement:
            continue
    return kept


def _valid(lines: list[str]) -> list[str]:
    """The requirements of requirements.txt-style lines (comments, blank lines and options left out)."""
    stripped = (line.split("#", 1)[0].strip() for line in lines)
    return _parsed(line for line in stripped if line and not line.startswith("-"))  # -r, -e, --index-url: options


def _of_an_extra(requirement: str) -> bool:
    """Whether a requirement applies only with an extra (`; extra == "dev"`): not a base dependency. The marker's
    quoted values are set aside first, so that a value spelt "extra" is not taken for the variable."""
    marker = Requirement(requirement).marker
    return marker is not None and re.search(r"\bextra\b", re.sub(r"'[^']*'|\"[^\"]*\"", "", str(marker))) is not None


def _metadata_folders(folder: Path) -> list[Path]:
    """Where a built package keeps its metadata, the most faithful first: a wheel's *.dist-info, an sdist's root
    (PKG-INFO), setuptools' *.egg-info (beside the code, or under src/)."""
    root = [folder] if (folder / "PKG-INFO").is_file() else []
    return [*sorted(folder.glob("*.dist-info")), *root, *sorted(folder.glob("*.egg-info")),
            *sorted(folder.glob("src/*.egg-info"))]


def metadata_dependencies(folder: Path) -> list[str]:
    """The base dependencies a built package's metadata declares (Requires-Dist, extras and markers kept;
    requirements of an extra left out). importlib.metadata reads them as an installed distribution's are read:
    METADATA or PKG-INFO, or an older egg-info's requires.txt."""
    for found in _metadata_folders(folder):
        requires = Distribution.at(found).requires
        if requires:
            return [r for r in _parsed(requires) if not _of_an_extra(r)]
    return []


def _project(source: Path) -> dict:
    """The [project] table of the source's pyproject.toml ({} without one)."""
    pyproject = (source if source.is_dir() else source.parent) / "pyproject.toml"
    try:
        return tomllib.loads(pyproject.read_text()).get("project", {}) if pyproject.is_file() else {}
    except tomllib.TOMLDecodeError:
        return {}


def distribution_name(requirement: str) -> str:
    """The normalised name a requirement is for ("Foo_Bar>=1" -> "foo-bar")."""
    try:
        return Requirement(requirement).name.lower().replace("_", "-")
    except InvalidRequirement:
        return requirement.lower()


def declared_description(source: Path) -> str:
    description = _project(source).get("description")
    return description.strip() if isinstance(description, str) else ""


def declared_dependencies(source: Path) -> list[str]:
    project = _project(source)
    if project.get("dependencies"):  # listed there, so not dynamic
        return _valid(list(project["dependencies"]))
    folder = source if source.is_dir() else source.parent
    built = metadata_dependencies(folder)
    if built:
        return built
    requirements = folder / "requirements.txt"
    if requirements.is_file():
        return _valid(requirements.read_text().splitlines())
    return []


def locked_pins(source: Path, requirements: list[str]) -> list[str]:
    """`name==version` for each of `requirements` that the project's uv.lock resolves to one version from a package
    index (and that version fits the requirement): what the project's own runner installs (`uv sync --frozen`)."""
    try:
        with (source / "uv.lock").open("rb") as file:
            packages = tomllib.load(file).get("package", [])
    except (OSError, tomllib.TOMLDecodeError):
        return []
    versions: dict[str, set[str]] = {}
    for package in packages:
        if isinstance(package, dict) and "registry" in (package.get("source") or {}):
            versions.setdefault(distribution_name(str(package.get("name", ""))), set()).add(str(package["version"]))
    pins = []
    for requirement in requirements:
        name = distribution_name(requirement)
        locked = versions.get(name, set())
        if len(locked) == 1 and Requirement(requirement).specifier.contains(next(iter(locked)), prereleases=True):
            pins.append(f"{name}=={next(iter(locked))}")
    return pins

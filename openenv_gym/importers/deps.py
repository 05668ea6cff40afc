"""What a source declares about itself: its pyproject.toml [project] dependencies (or its requirements.txt)
and description."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement


def _valid(lines: list[str]) -> list[str]:
    kept = []
    for line in lines:
        line = line.split("#", 1)[0].strip()
        if not line or line.startswith("-"):  # options such as -r, -e, --index-url are not requirements
            continue
        try:
            kept.append(str(Requirement(line)))
        except InvalidRequirement:
            continue
    return kept


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
    if project.get("dependencies"):
        return _valid(list(project["dependencies"]))
    folder = source if source.is_dir() else source.parent
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

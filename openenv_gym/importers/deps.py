"""Dependencies a source declares: its pyproject.toml [project] dependencies, or its requirements.txt."""

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


def declared_dependencies(source: Path) -> list[str]:
    folder = source if source.is_dir() else source.parent
    pyproject = folder / "pyproject.toml"
    if pyproject.is_file():
        try:
            project = tomllib.loads(pyproject.read_text()).get("project", {})
        except tomllib.TOMLDecodeError:
            project = {}
        if project.get("dependencies"):
            return _valid(list(project["dependencies"]))
    requirements = folder / "requirements.txt"
    if requirements.is_file():
        return _valid(requirements.read_text().splitlines())
    return []

"""Walk a source (a .py file or a folder) and parse its modules, without importing or running anything."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from openenv_gym.runtime.pyparse import parse as parse_python

SKIPPED_DIRS = {".git", ".hg", ".svn", "__pycache__", ".venv", "venv", "env", ".tox", ".nox", "build", "dist",
                "node_modules", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".ipynb_checkpoints", "site-packages"}


def python_files(source: Path) -> Iterator[Path]:
    if source.is_file():
        yield source
        return
    for path in sorted(source.rglob("*.py")):
        if path.is_symlink():  # never read outside the source; a link inside names a file that is read anyway
            continue
        if not any(part in SKIPPED_DIRS or part.endswith(".egg-info") for part in path.relative_to(source).parts):
            yield path


def parsed_files(source: Path) -> Iterator[tuple[Path, ast.Module]]:
    """The source's modules that are valid Python, with their syntax trees (the others are skipped)."""
    for path in python_files(source):
        tree = parse(path)
        if tree is not None:
            yield path, tree


def module_name(source: Path, path: Path) -> str:
    """Dotted module path of `path` inside `source` (a file source is its own top-level module)."""
    relative = path.relative_to(source.parent if source.is_file() else source).with_suffix("")
    parts = list(relative.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def parse(path: Path) -> ast.Module | None:
    """The module's syntax tree, or None when it is not valid Python (it is skipped, never run)."""
    try:
        return parse_python(path.read_text(encoding="utf-8", errors="replace"), str(path))  # type: ignore[return-value]
    except (SyntaxError, ValueError):
        return None


def syntax_errors(source: Path) -> list[str]:
    """The modules of a source that are not valid Python, as "file, line N: message"."""
    errors = []
    for path in python_files(source):
        try:
            parse_python(path.read_text(encoding="utf-8", errors="replace"), str(path))
        except SyntaxError as exc:
            errors.append(f"{path}, line {exc.lineno}: SyntaxError: {exc.msg}")
        except ValueError as exc:  # e.g. a NUL byte
            errors.append(f"{path}: {exc}")
    return errors


def first_docstring_line(tree: ast.Module, name: str) -> str:
    """The first line of the docstring of top-level class or function `name`, else of the module."""
    for node in tree.body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
            doc = ast.get_docstring(node)
            if doc:
                return doc.strip().splitlines()[0]
    doc = ast.get_docstring(tree)
    return doc.strip().splitlines()[0] if doc else ""

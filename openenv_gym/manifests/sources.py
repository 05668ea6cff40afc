"""What a vendored source folder provides: the top-level module names it would take on sys.path.

The importer refuses names that would shadow others; the adapters load exactly these names from it.
"""

from __future__ import annotations

from pathlib import Path


def top_level_modules(source: Path) -> set[str]:
    """Names the source's own top-level modules and packages would take if put on sys.path."""
    if source.is_file():
        return {source.stem}
    names = {p.stem for p in source.glob("*.py")}
    names |= {p.name for p in source.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    return names - {"__init__", "setup", "conftest"}

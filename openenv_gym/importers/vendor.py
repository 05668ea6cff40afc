"""Copy a source into an environment folder, leaving out secrets and junk, and hash what was copied."""

from __future__ import annotations

import fnmatch
import hashlib
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from openenv_gym.importers.scan import SKIPPED_DIRS

MAX_FILE_BYTES = 50 * 2**20
SECRET_PATTERNS = (".env", ".env.*", "*.pem", "*.key", "id_rsa*", "id_ed25519*", "id_ecdsa*", "*.p12", "*.pfx",
                   "secrets.*", "*_secret.*", "*_secrets.*", "credentials*", ".netrc", ".pypirc")
JUNK_PATTERNS = ("*.pyc", "*.pyo", "*.so", "*.dylib", "*.dll", ".DS_Store", "*.egg-info")


@dataclass
class VendorReport:
    copied: list[Path] = field(default_factory=list)
    left_out: list[tuple[Path, str]] = field(default_factory=list)  # (path relative to the source, why)


def _reason_to_skip(path: Path, relative: Path) -> str | None:
    name = path.name
    if any(fnmatch.fnmatch(name, pattern) for pattern in SECRET_PATTERNS):
        return "may hold secrets"
    if path.is_dir():
        if name in SKIPPED_DIRS or name.endswith(".egg-info"):
            return "version control, cache, build output or virtual environment"
        if (path / "pyvenv.cfg").exists():
            return "a virtual environment"
        return None
    if any(fnmatch.fnmatch(name, pattern) for pattern in JUNK_PATTERNS):
        return "compiled or generated file"
    if path.stat().st_size > MAX_FILE_BYTES:
        return f"larger than {MAX_FILE_BYTES // 2**20} MiB (pass it with --data if the environment needs it)"
    return None


def vendor(source: Path, destination: Path) -> VendorReport:
    """Copy `source` (a file or a folder) into `destination`."""
    report = VendorReport()
    destination.mkdir(parents=True, exist_ok=True)
    if source.is_file():
        shutil.copy2(source, destination / source.name)
        report.copied.append(Path(source.name))
        return report
    pending = [source]
    while pending:
        folder = pending.pop()
        for path in sorted(folder.iterdir()):
            relative = path.relative_to(source)
            reason = _reason_to_skip(path, relative)
            if reason is not None:
                report.left_out.append((relative, reason))
            elif path.is_dir():
                pending.append(path)
            elif path.is_file():
                target = destination / relative
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, target)
                report.copied.append(relative)
    return report


def copy_data(paths: list[Path], destination: Path) -> list[Path]:
    """Copy data files or folders named with --data next to the vendored source; return their names."""
    copied = []
    for path in paths:
        target = destination / path.name
        if path.is_dir():
            shutil.copytree(path, target, dirs_exist_ok=True)
        else:
            shutil.copy2(path, target)
        copied.append(Path(path.name))
    return copied


def tree_hash(folder: Path) -> str:
    """sha256 over the relative paths and contents of every file under `folder`."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(path.relative_to(folder).as_posix().encode() + b"\0")
        digest.update(path.read_bytes())
    return "sha256:" + digest.hexdigest()

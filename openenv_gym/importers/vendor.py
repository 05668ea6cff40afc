"""Copy a source into an environment folder, leaving out secrets and junk, and hash what was copied.

The copy never leaves the source: a link is followed only to a file inside the source tree (a link to a
folder is not followed, so a link loop cannot recur), and the whole copy is capped in size.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from openenv_gym.importers.base import ImportFailedError
from openenv_gym.importers.scan import SKIPPED_DIRS
from openenv_gym.importers.secrets import secret_by_name, secret_in_content

MAX_FILE_BYTES = 50 * 2**20  # a source file above this is left out (data comes with --data)
MAX_TOTAL_BYTES = 4 * 2**30  # an import above this is refused: it is not a checkout
JUNK_PATTERNS = ("*.pyc", "*.pyo", "*.so", "*.dylib", "*.dll", ".DS_Store", "*.egg-info")


@dataclass
class VendorReport:
    copied: list[Path] = field(default_factory=list)  # relative to the vendored folder
    left_out: list[tuple[Path, str]] = field(default_factory=list)  # (path as the user named it, why)
    total_bytes: int = 0


def _link_problem(path: Path, root: Path) -> str | None:
    """Why a symbolic link is not followed, or None for a link to a file inside the source."""
    try:
        target = path.resolve(strict=True)
    except FileNotFoundError:
        return "a dangling symbolic link"
    except (OSError, RuntimeError):  # RuntimeError: a loop of links
        return "a symbolic link loop"
    if target != root and root not in target.parents:
        return "a symbolic link that leaves the source"
    if target.is_dir():
        return "a symbolic link to a folder (its target is copied where it lies)"
    return None


def _reason_to_skip(path: Path, relative: Path, root: Path, is_data: bool) -> str | None:
    if secret_by_name(relative):
        return "may hold secrets"
    if path.is_symlink():
        link = _link_problem(path, root)
        if link is not None:
            return link
    if is_data:  # the user named this data: only secrets and links stay out
        return None if path.is_dir() else _not_copied(path, is_data)
    if path.is_dir():
        if path.name in SKIPPED_DIRS or path.name.endswith(".egg-info"):
            return "version control, cache, build output or virtual environment"
        if (path / "pyvenv.cfg").exists():
            return "a virtual environment"
        return None
    return _not_copied(path, is_data)


def _not_copied(path: Path, is_data: bool) -> str | None:
    """Why a file is not copied, or None."""
    if not path.is_file():
        return "not a regular file"
    if not is_data and any(fnmatch.fnmatch(path.name, pattern) for pattern in JUNK_PATTERNS):
        return "compiled or generated file"
    if not is_data and path.stat().st_size > MAX_FILE_BYTES:
        return f"larger than {MAX_FILE_BYTES // 2**20} MiB (pass it with --data if the environment needs it)"
    why = secret_in_content(path)
    return f"may hold secrets: {why}" if why else None


class _Copier:
    """Copies files into one destination, counting bytes against the import's cap."""

    def __init__(self, destination: Path, report: VendorReport) -> None:
        self.destination = destination
        self.report = report

    def file(self, path: Path, target: Path, shown: Path) -> None:
        self.report.total_bytes += path.stat().st_size
        if self.report.total_bytes > MAX_TOTAL_BYTES:
            raise ImportFailedError(
                f"the import holds more than {MAX_TOTAL_BYTES / 2**30:g} GiB (at {shown}); import the code alone "
                "and let the environment load large data from where it lies")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)  # contents only: a followed link becomes a plain file
        shutil.copymode(path, target)
        self.report.copied.append(target.relative_to(self.destination))

    def tree(self, root: Path, into: Path, shown: Path, is_data: bool) -> None:
        """Copy the folder `root` into `into`; `shown` is how the user named `root`."""
        pending = [root]
        while pending:
            folder = pending.pop()
            for path in sorted(folder.iterdir()):
                relative = path.relative_to(root)
                reason = _reason_to_skip(path, relative, root, is_data)
                if reason is not None:
                    self.report.left_out.append((shown / relative, reason))
                elif path.is_dir():
                    pending.append(path)
                else:
                    self.file(path, into / relative, shown / relative)


def vendor(source: Path, destination: Path, data: list[Path] = ()) -> VendorReport:
    """Copy `source` (a file or a folder) into `destination`, then the `data` files and folders.

    A data path keeps its place relative to the working directory when it lies below it
    (`--data data/train.jsonl` lands at `data/train.jsonl`), so the environment finds it where it did in
    its checkout; any other data path lands under its own name.
    """
    report = VendorReport()
    copier = _Copier(destination, report)
    destination.mkdir(parents=True, exist_ok=True)
    if source.is_file():
        copier.file(source, destination / source.name, Path(source.name))
    else:
        copier.tree(source, destination, Path("."), is_data=False)
    for named in data:
        path = Path(os.path.abspath(named))  # the user's path, links not resolved: they name what they see
        place = _data_place(path)
        reason = "may hold secrets" if secret_by_name(Path(path.name)) else None
        if reason is None and not path.is_dir():
            reason = _not_copied(path, is_data=True)
        if reason is not None:
            report.left_out.append((named, reason))
        elif path.is_dir():
            if path.resolve() in destination.resolve().parents:
                raise ImportFailedError(f"--data {named} holds the output folder; name the data itself")
            copier.tree(path.resolve(), destination / place, named, is_data=True)
        else:
            copier.file(path, destination / place, named)
    return report


def _data_place(path: Path) -> Path:
    cwd = Path.cwd()
    if cwd in path.parents:
        return path.relative_to(cwd)
    if path == cwd or not path.name:
        raise ImportFailedError(f"--data {path} names the working directory or a root; name the data itself")
    return Path(path.name)


def tree_hash(folder: Path) -> str:
    """sha256 over the relative paths and contents of every file under `folder`."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(path.relative_to(folder).as_posix().encode() + b"\0")
        digest.update(path.read_bytes())
    return "sha256:" + digest.hexdigest()

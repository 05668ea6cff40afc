"""Making a used sandbox as new for the next episode, or saying it cannot be cheaply: its processes are killed
first (cgroups.kill_all, or pidns.kill_all where it has no control group), so nothing inside changes while its file
systems are emptied from outside."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

WIPE_BUDGET = 1000  # files and folders at most, removed inline; more, and the sandbox is thrown away instead


def leading_to_mounts(mount_points: list[str], folder: str) -> set[str]:
    """The folders inside `folder` (paths as the sandbox sees them) that lead to one of `mount_points` (what
    bubblewrap mounted there: the environment's folder shown again, the working directory): they stay, emptied of
    everything else."""
    found = set()
    for point in mount_points:
        if point.startswith(f"{folder}/"):
            parts = point[len(folder) + 1:].split("/")[:-1]
            found |= {"/".join([folder, *parts[:end]]) for end in range(1, len(parts) + 1)}
    return found


def empty(folder: Path, kept: set[Path] = frozenset()) -> bool:  # type: ignore[assignment]
    """Remove what the episode put in `folder`, one of its file systems, if that is at most WIPE_BUDGET files and
    folders; whether it did. What is mounted there is kept (another file system: the working directory in /tmp,
    what bubblewrap shows again read-only), and so are the folders of `kept` (host paths: those that lead to a mount,
    emptied of everything else). Symbolic links are removed, never followed."""
    device = os.lstat(folder).st_dev
    doomed: list[os.DirEntry] = []
    pending = [folder]
    while pending:
        with os.scandir(pending.pop()) as entries:
            for entry in entries:
                if entry.stat(follow_symlinks=False).st_dev != device:
                    continue
                if Path(entry.path) in kept:
                    pending.append(Path(entry.path))
                    continue
                doomed.append(entry)
                if len(doomed) > WIPE_BUDGET:  # (counted as it is read: a folder of a million files is not read)
                    return False
    count = len(doomed)
    for entry in doomed:
        if entry.is_dir(follow_symlinks=False):
            for _, folders, files in os.walk(entry.path):  # (no mount in it: the episode made it, after them)
                count += len(folders) + len(files)
                if count > WIPE_BUDGET:
                    return False
    try:
        for entry in doomed:
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
    except OSError:  # (a mount deeper down that nothing led to)
        return False
    return True

"""Making a used sandbox as new for the next episode, or saying it cannot be cheaply: its processes are killed
first (cgroups.kill_all), so nothing inside changes while its file systems are emptied from outside."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

WIPE_BUDGET = 1000  # files and folders at most, removed inline; more, and the sandbox is thrown away instead


def empty(folder: Path, keep_roots: bool) -> bool:
    """Remove what the episode put in `folder`, one of its file systems, if that is at most WIPE_BUDGET files and
    folders; whether it did. What is mounted there is kept (another file system: the working directory in /tmp,
    what bubblewrap shows again read-only), and so, with `keep_roots`, is what root owns (the folders bubblewrap
    made for those mounts: no episode can write in them, nor rename them in a sticky /tmp). Symbolic links are
    removed, never followed."""
    device = os.lstat(folder).st_dev
    doomed = []
    with os.scandir(folder) as entries:
        for entry in entries:
            status = entry.stat(follow_symlinks=False)
            if status.st_dev == device and not (keep_roots and status.st_uid == 0):
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
    except OSError:  # (a mount deeper down: what bubblewrap shows again in a folder of the task's own)
        return False
    return True

"""The mount view of a sandbox, as bubblewrap's arguments: the host's root read-only, with what belongs to the
server, to other users and to other episodes hidden under empty file systems, what the episode must read (its
environment's folder and venv, Python) shown again read-only, and a working directory and a /tmp of its own, each
a size-bounded tmpfs that ends with the sandbox."""

from __future__ import annotations

import functools
import os
import sys
import tempfile
from pathlib import Path

from openenv_gym.sandbox.overlay import OVERLAID
from openenv_gym.sandbox.policy import SandboxPolicy
from openenv_gym.sandbox.rootfs import NOT_SHOWN
from openenv_gym.sandbox.rootfs import mount_point as rootfs_mount_point

WORKDIR = "/tmp/work"  # the episode's working directory, inside (under /tmp, which every sandbox has its own of)
# Hidden whatever the server's settings: homes, temporary and runtime files (other episodes', sockets), mounts
ALWAYS_HIDDEN = ("/root", "/home", "/tmp", "/var/tmp", "/run", "/mnt", "/media")
# The system's own folders (the FHS's): a task that writes in one needs a container engine. Any other folder at the
# root is the task's own, whatever the host keeps there (a checkout in /work, a CI's /check): it gets an empty one.
SYSTEM = (*OVERLAID, "/dev", "/proc", "/sys")
HOMES = ("OPENENV_GYM_HOME", "OPENENV_GYM_VENVS", "HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME")


def hidden_paths() -> list[Path]:
    """Folders the sandbox sees empty: the fixed ones, the server's homes and caches, its temporary folder."""
    named = [os.environ.get(name) for name in HOMES] + [str(Path.home()), tempfile.gettempdir()]
    found = {Path(path).resolve() for path in (*ALWAYS_HIDDEN, *filter(None, named)) if Path(path).is_dir()}
    return sorted(found, key=lambda path: len(path.parts))


PACKAGE = Path(__file__).resolve().parent.parent  # openenv_gym's own files: its tools and programs run inside


def python_paths() -> list[str]:
    """What this Python needs to read to run (and so do the programs forked from it, or its venv's interpreter), and
    openenv_gym itself (shown on its own: a checkout in a folder the sandbox hides, /tmp say, is not shown whole)."""
    return [sys.base_prefix, sys.prefix, sys.exec_prefix, str(PACKAGE), *(entry for entry in sys.path if entry)]


def _under(path: Path, folders: list[Path]) -> bool:
    return any(path == folder or folder in path.parents for folder in folders)


@functools.lru_cache(maxsize=64)
def bwrap_arguments(policy: SandboxPolicy) -> tuple[str, ...]:
    """bubblewrap's mount arguments for `policy` (made once per policy in a process: the homes and paths they name
    stay); the namespaces and the command are the caller's."""
    if policy.image is not None:
        return image_arguments(policy)
    hidden = hidden_paths()
    mounted = [folder for folder in hidden if not _under(folder.parent, hidden)]  # (those in others are hidden already)
    arguments = [*root_arguments(), "--dev", "/dev", "--proc", "/proc"]
    for folder in mounted:
        if folder != Path("/tmp"):
            arguments += ["--tmpfs", str(folder)]
    arguments += _tmpfs_folders(policy)  # (before what is shown again: a task's own /work hides a checkout there)
    covered = [*hidden, *map(Path, policy.writable)]
    wanted = {Path(path).resolve() for path in (*policy.readable, *python_paths()) if Path(path).exists()}
    # (the rest is in view already; a covered folder itself, or one holding it, a script's folder in sys.path
    # being /tmp say, is never shown whole)
    wanted = {path for path in wanted
              if _under(path, covered) and not any(_under(folder, [path]) for folder in covered)}
    shown = {path for path in wanted if not any(parent in wanted for parent in path.parents)}
    made: set[Path] = {*mounted, *map(Path, policy.writable)}
    for path in sorted(shown):
        for parent in reversed(path.parents):  # the folders up to it, in an empty file system: traversable
            if parent not in made and _under(parent, covered):
                arguments += ["--perms", "0755", "--dir", str(parent)]
                made.add(parent)
        arguments += ["--ro-bind", str(path), str(path)]
    return (*arguments, *_own_files(policy))


def _own_files(policy: SandboxPolicy) -> list[str]:
    """The files shown at the root, and the working directory of its own (last: over every other mount)."""
    arguments = []
    for source, inside in policy.shown:
        arguments += ["--ro-bind", source, inside]
    return [*arguments, "--size", str(policy.disk_bytes), "--perms", "0700", "--tmpfs", WORKDIR, "--chdir", WORKDIR]


def _tmpfs_folders(policy: SandboxPolicy) -> list[str]:
    """/dev/shm, /tmp, and the folders of its own: empty size-bounded file systems (/home before /home/user)."""
    arguments = ["--size", str(policy.disk_bytes), "--perms", "1777", "--tmpfs", "/dev/shm"]  # (POSIX semaphores)
    arguments += ["--size", str(policy.disk_bytes), "--perms", "1777", "--tmpfs", "/tmp"]
    for folder in sorted(policy.writable, key=lambda path: path.count("/")):
        arguments += ["--size", str(policy.disk_bytes), "--perms", "0755", "--tmpfs", folder]
    return arguments


def image_arguments(policy: SandboxPolicy) -> tuple[str, ...]:
    """An image's root (policy.image, exported: rootfs.py) read-only, the host's sysfs read-only as an engine shows
    it, and of the host only what the episode's programs read to run (this Python, openenv_gym, the environment's
    folder), each at its own path (made in the image's root: rootfs.mount_point); where that path is the image's
    (a system Python's /usr/lib/python3.11), the host's is shown over it. The episode writes the image's folders
    through overlays of its own (sandbox.py)."""
    assert policy.image is not None
    rootfs = Path(policy.image)
    arguments = [*root_arguments(rootfs), "--dev", "/dev", "--proc", "/proc", "--ro-bind", "/sys", "/sys",
                 *_tmpfs_folders(policy)]
    for path in shown_in_images(policy.readable, policy.writable):
        if rootfs_mount_point(rootfs, str(path), path.is_dir()):
            arguments += ["--ro-bind", str(path), str(path)]
    return (*arguments, *_own_files(policy))


def shown_in_images(readable: tuple[str, ...], writable: tuple[str, ...] = ()) -> list[Path]:
    """The host's paths an episode in an image reads to run (this Python, openenv_gym, `readable`), each shown at its
    own path: never a system folder whole (/usr, /usr/lib), nor one under another shown, /tmp or a `writable`."""
    covered = [Path("/tmp"), *map(Path, writable)]
    wanted = {Path(path).resolve() for path in (*readable, *python_paths()) if Path(path).exists()}
    wanted = {path for path in wanted if len(path.parts) > (3 if path.parts[1:2] == ("usr",) else 2)
              and not _under(path, covered)}
    return sorted(path for path in wanted if not any(parent in wanted for parent in path.parents))


def root_arguments(root: Path = Path("/")) -> list[str]:
    """A root read-only, the host's or an image's: each of its entries shown on bubblewrap's own root (rather than
    the root bound whole), so that a folder it has not (a Harbor task's /app) can be made beside them."""
    arguments = []
    with os.scandir(root) as entries:
        for entry in sorted(entries, key=lambda entry: entry.name):
            if entry.name in ("dev", "proc") or (root != Path("/") and entry.name in NOT_SHOWN):
                continue
            inside = f"/{entry.name}"
            if entry.is_symlink():  # (/bin -> usr/bin: a link again, so that paths read as on the host)
                arguments += ["--symlink", os.readlink(entry.path), inside]
            else:
                arguments += ["--ro-bind", entry.path, inside]
    return arguments


def own_folder(path: str) -> str | None:
    """The folder a sandbox must have of its own (SandboxPolicy.writable) for its programs to write `path` (absolute):
    a top-level folder not the system's (/app, shown empty where the host has one), or one in a folder the sandbox
    hides (/home/agent); "/tmp" for what it writes in its /tmp already; None for a path in the system's folders,
    which it only reads (/usr/local/bin)."""
    parts = Path(path).parts
    if not Path(path).is_absolute() or ".." in parts or len(parts) < 2:
        return None
    top = f"/{parts[1]}"
    if top == "/tmp":
        return "/tmp"
    if top in ALWAYS_HIDDEN:
        return f"{top}/{parts[2]}" if len(parts) > 2 else top
    return None if top in SYSTEM else top


def hosts_file(policy: SandboxPolicy) -> bytes:
    """The sandbox's /etc/hosts where it is allowed hosts by name: each name at its address inside, where the server
    forwards it (ports.into_sandbox); its own names after."""
    names = {host: inside for host, _, inside in policy.allowed() if host != inside}
    lines = [f"{inside}\t{host}" for host, inside in names.items()]
    for address, own in (("127.0.0.1", "localhost sandbox"), ("::1", "localhost ip6-localhost ip6-loopback")):
        lines.append(f"{address}\t{' '.join(name for name in own.split() if name not in names)}")
    return ("\n".join(lines) + "\n").encode()

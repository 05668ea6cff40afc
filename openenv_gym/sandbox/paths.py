"""Reading and writing a sandbox's files from the server, which runs as root: every path is resolved inside the
sandbox's root (openat2(2) with RESOLVE_IN_ROOT), so a symbolic link its programs made, `out.txt -> /etc/shadow`,
leads to the sandbox's /etc/shadow (hidden or the host's read-only view), never to the host's file. A plain path
through /proc/<pid>/root would follow an absolute link to the server's own root."""

from __future__ import annotations

import ctypes
import os
import posixpath
import stat

from openenv_gym.runtime.lifetime import libc

SYS_OPENAT2 = 437  # the same number on every architecture
RESOLVE_NO_MAGICLINKS, RESOLVE_NO_SYMLINKS, RESOLVE_BENEATH, RESOLVE_IN_ROOT = 0x02, 0x04, 0x08, 0x10


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


def openat2(directory: int, path: str, flags: int, resolve: int, mode: int = 0) -> int:
    how = _OpenHow(flags | os.O_CLOEXEC, mode, resolve)
    fd = libc().syscall(SYS_OPENAT2, directory, os.fsencode(path), ctypes.byref(how), ctypes.sizeof(how))
    if fd < 0:
        error = ctypes.get_errno()
        raise OSError(error, os.strerror(error), path)
    return fd


def _root(pid: int) -> int:
    return os.open(f"/proc/{pid}/root", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)


def read_inside(pid: int, path: str, max_bytes: int | None = None) -> bytes:
    """The bytes (at most `max_bytes`) of the regular file `path` (absolute, as the sandbox of process `pid` sees
    it). Raises OSError, IsADirectoryError for what is not a regular file (a FIFO is never waited on)."""
    root = _root(pid)
    try:
        fd = openat2(root, path, os.O_RDONLY | os.O_NONBLOCK, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS)
    finally:
        os.close(root)
    with os.fdopen(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise IsADirectoryError(f"{path} is not a regular file")
        return file.read() if max_bytes is None else file.read(max_bytes)


def write_inside(pid: int, path: str, data: bytes, uid: int, mode: int = 0o644) -> None:
    """Write `data` to `path` (absolute, in the sandbox of process `pid`), making the folders above it; what is made
    belongs to `uid` (the episode's, so that its programs may change it). No link is followed on the way."""
    folder, name = posixpath.split(posixpath.normpath(path))
    directory = _folder(pid, folder, uid)
    try:
        fd = openat2(directory, name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW,
                     RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS, mode)
    finally:
        os.close(directory)
    with os.fdopen(fd, "wb") as file:
        os.fchown(fd, uid, uid)
        os.fchmod(fd, mode)
        file.write(data)


def make_folder_inside(pid: int, path: str, uid: int, mode: int | None = None) -> None:
    """Make the folder `path` (absolute, in the sandbox of process `pid`) and those above it, as write_inside does;
    the folder `mode`, where given."""
    folder = _folder(pid, posixpath.normpath(path), uid)
    try:
        if mode is not None:
            os.fchmod(folder, mode)
    finally:
        os.close(folder)


def _folder(pid: int, folder: str, uid: int) -> int:
    """An fd of `folder` in the sandbox, made (owned by `uid`) where it is not, no link followed on the way."""
    directory = _root(pid)
    try:
        for part in filter(None, folder.split("/")):
            try:
                os.mkdir(part, 0o755, dir_fd=directory)
                made = True
            except FileExistsError:
                made = False
            inner = openat2(directory, part, os.O_RDONLY | os.O_DIRECTORY, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)
            if made:
                os.fchown(inner, uid, uid)
            os.close(directory)
            directory = inner
    except BaseException:
        os.close(directory)
        raise
    return directory

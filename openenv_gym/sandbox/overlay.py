"""System folders an episode writes in, as a container's image build would (`RUN ln -s /usr/bin/python3
/usr/bin/python`, `mkdir -p /opt/data`): each one the sandbox shows read-only becomes an overlay of its own, the
host's folder the lower layer, never written, the upper layer a size-bounded tmpfs that ends with the sandbox; and
the paths the episode writes are made its uid's there (their copies in the upper layer, a folder's without its
files), so that it writes them as an image's root would and nothing else of the system.

A helper process does it once, before the episode's first program: it enters the sandbox's mount namespace (only
that: it is the server's own code, on paths resolved in the sandbox's view, which nothing of the episode's has
changed yet), mounts and changes owners, and ends. It is this file run alone (the standard library only: a process
with threads, which numpy's would start, cannot enter a mount namespace).

    await own(sandbox_pid, uid, size_bytes, ["/usr/bin/python", "/opt/data"])

Over an image's root (rootfs.py), every folder of the image's is made an overlay (`tops`), and nothing changes
owner: the episode is the image's root, and owns what it owns.
"""

from __future__ import annotations

import ctypes
import os
import sys

OVERLAID = ("/bin", "/boot", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/opt", "/sbin", "/srv", "/usr", "/var")
CLONE_NEWNS, MS_NOSUID, MS_NODEV, MS_BIND, MS_REC, MNT_DETACH = 0x20000, 2, 4, 4096, 16384, 2
STAGING = "/tmp/.openenv-gym-overlay"  # inside, while the helper works: gone before any program of the episode runs


def resolved(path: str) -> str:
    """Absolute `path` with its folder's links resolved (/bin/x is /usr/bin/x), its last part kept (a link to make)."""
    return os.path.join(os.path.realpath(os.path.dirname(path.rstrip("/")) or "/"), os.path.basename(path.rstrip("/")))


def system_folder(path: str) -> str | None:
    """The system folder an overlay makes writable for `path` (absolute, resolved), or None: not in one."""
    return next((top for top in OVERLAID if path == top or path.startswith(top + "/")), None)


async def own(pid: int, uid: int, size_bytes: int, paths: tuple[str, ...], tops: tuple[str, ...] = ()) -> None:
    """Give the episode of sandbox `pid` (its uid `uid`) the system `paths`, and the folders `tops` whole, through
    overlays (see above)."""
    import asyncio  # (here: the helper, this file alone, starts without it, in half the time)

    from openenv_gym.errors import EnvError  # (and it has no package to import)

    helper = await asyncio.create_subprocess_exec(
        sys.executable, "-I", "-S", __file__, str(pid), str(uid),
        str(size_bytes), ":".join(tops), *paths, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE)
    _, said = await helper.communicate()
    if helper.returncode != 0:
        raise EnvError(f"the episode's sandbox could not make its folders writable ({', '.join(paths or tops)}): "
                       f"{said.decode(errors='replace').strip().splitlines()[-1:] or helper.returncode}")


def main() -> None:
    pid, uid, size, given, *paths = sys.argv[1:]
    libc = ctypes.CDLL(None, use_errno=True)
    with open(f"/proc/{pid}/mountinfo") as table:  # (read from here: inside, /proc is the sandbox's PID namespace's)
        points = [line.split()[4].encode().decode("unicode_escape") for line in table]
    with open(f"/proc/{pid}/ns/mnt") as namespace:
        _check(libc.setns(namespace.fileno(), CLONE_NEWNS), "setns")
    os.chdir("/")
    found = [resolved(path) for path in paths]  # (in the sandbox's view, as the episode will see them)
    tops = sorted({top for path in found if (top := system_folder(path)) is not None} | set(filter(None,
                                                                                                given.split(":"))))
    os.mkdir(STAGING, 0o700)
    _mount(libc, "tmpfs", STAGING, "tmpfs", MS_NOSUID | MS_NODEV, f"size={size},mode=0700")
    for index, top in enumerate(tops):
        _overlay(libc, top, f"{STAGING}/{index}", [point for point in points if point.startswith(top + "/")])
    _check(libc.umount2(STAGING.encode(), MNT_DETACH), f"umount {STAGING}")  # (the overlays hold their layers)
    os.rmdir(STAGING)
    for path in found:
        _give(path, int(uid))


def _overlay(libc: ctypes.CDLL, top: str, staging: str, inner: list[str]) -> None:
    """`top` as an overlay: the folder shown read-only its lower layer, an upper layer in `staging`; what was
    mounted in it (`inner`) is there again: a folder bubblewrap shows bound aside and back, a file written in the
    overlay (its /etc/hosts, a file bubblewrap made and removed, cannot be bound again)."""
    outermost = [point for point in inner if not any(point.startswith(other + "/") for other in inner)]
    folders = [point for point in dict.fromkeys(outermost) if os.path.isdir(point)]
    files = {point: (_read(point), os.stat(point).st_mode & 0o7777)
             for point in outermost if not os.path.isdir(point)}
    for index, point in enumerate(folders):
        os.makedirs(f"{staging}/aside/{index}")
        _mount(libc, point, f"{staging}/aside/{index}", None, MS_BIND | MS_REC, None)  # (read-only stays so)
    for folder in ("upper", "work"):
        os.makedirs(f"{staging}/{folder}")
    lower = os.stat(top)  # (the overlay's root is its upper layer's: the owner and mode of the folder it covers)
    os.chown(f"{staging}/upper", lower.st_uid, lower.st_gid)
    os.chmod(f"{staging}/upper", lower.st_mode & 0o7777)
    _mount(libc, "overlay", top, "overlay", MS_NOSUID | MS_NODEV,
           f"lowerdir={top},upperdir={staging}/upper,workdir={staging}/work")
    for index, point in enumerate(folders):
        _mount(libc, f"{staging}/aside/{index}", point, None, MS_BIND | MS_REC, None)
    for point, (data, mode) in files.items():
        with open(point, "wb") as written:
            written.write(data)
        os.chmod(point, mode)


def _read(path: str) -> bytes:
    with open(path, "rb") as file:
        return file.read()


def _give(path: str, uid: int) -> None:
    """The episode's uid owns `path` if it is there (copied up, a folder without its files), and the nearest
    folder above it that is (where it makes what is not there yet)."""
    if os.path.lexists(path):
        os.chown(path, uid, uid, follow_symlinks=False)
    folder = os.path.dirname(path)
    while not os.path.isdir(folder):
        folder = os.path.dirname(folder)
    os.chown(folder, uid, uid)


def _mount(libc: ctypes.CDLL, source: str, target: str, kind: str | None, flags: int, data: str | None) -> None:
    _check(libc.mount(source.encode(), target.encode(), kind.encode() if kind else None, flags,
                      data.encode() if data else None), f"mount {target}")


def _check(result: int, what: str) -> None:
    if result != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"{what}: {os.strerror(error)}")


if __name__ == "__main__":
    main()

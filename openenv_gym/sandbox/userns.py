"""A server run by an ordinary user starts in a user namespace of its own, where it is root: there it makes every
episode's sandbox as a root server does (sandbox.py), with no privilege on the host. Rootless Podman starts the
same way.

Its uid maps to root inside. Where the system grants the user subordinate uids (/etc/subuid, /etc/subgid) and
newuidmap and newgidmap are installed, they are mapped too, and each episode gets one of its own. Otherwise the
namespace maps that one uid, and every episode shares it, in namespaces of its own (sandbox.py).

This file runs alone, before the server (the standard library only: a process can enter a new user namespace only
while it has one thread, and the server starts threads), then execs the server's command inside:

    python -I -S userns.py -- python -m openenv_gym serve ...

If the kernel refuses (user namespaces disabled, a container's seccomp profile), the command runs anyway, outside,
with the reason in OPENENV_GYM_USERNS_REFUSED, for the server to say why it cannot sandbox.
"""

from __future__ import annotations

import ctypes
import os
import pwd
import shutil
import subprocess
import sys

CLONE_NEWUSER = 0x10000000
REFUSED = "OPENENV_GYM_USERNS_REFUSED"  # why this server, run by an ordinary user, has no user namespace
MAPPERS = {"uid": "newuidmap", "gid": "newgidmap"}


def command(rest: list[str]) -> list[str]:
    """`rest` (a command) run in a new user namespace, through this file."""
    return [sys.executable, "-I", "-S", os.path.abspath(__file__), "--", *rest]


def subordinate(kind: str, user: str, own: int, table: str | None = None) -> tuple[int, int] | None:
    """(first, count) of the subordinate ids ("uid" or "gid") the system grants `user` (whose own id is `own`), as
    newuidmap reads /etc/subuid: the first line naming the user or its id; None if none does."""
    try:
        with open(table or f"/etc/sub{kind}") as file:
            lines = file.read().splitlines()
    except OSError:
        return None
    for line in lines:
        fields = line.strip().split(":")
        if len(fields) == 3 and fields[0] in (user, str(own)) and fields[1].isdigit() and fields[2].isdigit():
            return int(fields[1]), int(fields[2])
    return None


def _subordinates() -> dict[str, tuple[int, int]]:
    """The subordinate uids and gids to map, if both are granted and both mappers are installed; else {}."""
    try:
        user = pwd.getpwuid(os.getuid()).pw_name
    except KeyError:  # (a uid with no name: a container run with --user 1000, say)
        user = str(os.getuid())
    found = {kind: subordinate(kind, user, own) for kind, own in (("uid", os.getuid()), ("gid", os.getgid()))}
    if all(found.values()) and all(shutil.which(mapper) for mapper in MAPPERS.values()):
        return found  # type: ignore[return-value]
    return {}


def _map_with_helpers(pid: int, ranges: dict[str, tuple[int, int]], go: int) -> None:
    """In a child forked before the parent's unshare: once told (`go`), map the parent's ids (its own to root, the
    subordinate ones after it) with the setuid mappers, which must run outside the namespace. Never returns."""
    code = 1
    try:
        if os.read(go, 1):
            code = 0
            for kind, (first, count) in ranges.items():
                own = os.getuid() if kind == "uid" else os.getgid()
                done = subprocess.run([MAPPERS[kind], str(pid), "0", str(own), "1", "1", str(first), str(count)],
                                      stdin=subprocess.DEVNULL, capture_output=True)
                code = code or done.returncode
    finally:
        os._exit(code)


def _map_own_id_only(uid: int, gid: int) -> None:
    """Map our uid and gid (as they were outside) to root: the only map an ordinary process may write itself
    (setgroups denied first)."""
    with open("/proc/self/setgroups", "w") as file:
        file.write("deny")
    for kind, own in (("uid", uid), ("gid", gid)):
        with open(f"/proc/self/{kind}_map", "w") as file:
            file.write(f"0 {own} 1")


def enter() -> None:
    """Make this process (one thread, an ordinary user) root of a new user namespace; OSError if the kernel
    refuses."""
    libc = ctypes.CDLL(None, use_errno=True)
    uid, gid = os.getuid(), os.getgid()  # (inside, before the map is written, they read as the overflow id)
    ranges = _subordinates()
    helper = go = None
    if ranges:
        go, tell = os.pipe()
        helper = os.fork()
        if helper == 0:
            os.close(tell)
            _map_with_helpers(os.getppid(), ranges, go)
        os.close(go)
    try:
        if libc.unshare(CLONE_NEWUSER) != 0:
            error = ctypes.get_errno()
            raise OSError(error, os.strerror(error))
    except OSError:
        if helper is not None:
            os.close(tell)
            os.waitpid(helper, 0)
        raise
    if helper is not None:
        os.write(tell, b"x")
        os.close(tell)
        _, status = os.waitpid(helper, 0)
        if status == 0:
            return
    try:
        _map_own_id_only(uid, gid)  # (no subordinate ids, or the mappers refused them)
    except OSError as exc:  # (inside already, unmapped: no way back out)
        raise SystemExit(f"openenv-gym: the server's user namespace could not map its uid: {exc}") from None


def main() -> None:
    rest = sys.argv[sys.argv.index("--") + 1:]
    try:
        enter()
    except OSError as exc:
        os.environ[REFUSED] = exc.strerror or str(exc)
    os.execvp(rest[0], rest)


if __name__ == "__main__":
    main()

"""Entering an episode's sandbox from a process forked warm (the program's, from the fork server): no interpreter
starts again. The process joins its control group, then the namespaces bubblewrap made (setns(2)): the mount view,
the network, UTS (and the sandbox's user namespace first, where it has one of its own: every episode shares the
server's uid, sandbox.py); and an IPC namespace of its own (unshare(2)), so that the System V objects it makes end
with its processes rather than outlive them in a sandbox that is renewed. It drops every privilege (no groups where
the kernel lets them go, the episode's own uid and gid, no capabilities left, none to gain by exec) and may make no
user namespace (seccomp.py).

A process can only be born in a PID namespace. The programs' fork server forks them in the sandbox's; any other
process (a subprocess between its fork and its exec) joins the namespace for its children and forks: the child,
the sandbox's process, goes on to run the program; the parent stays outside to wait for it and exit as it exits.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import signal
from dataclasses import dataclass

from openenv_gym.runtime.lifetime import die_with_parent, libc
from openenv_gym.sandbox.cgroups import Cgroup
from openenv_gym.sandbox.seccomp import compiled, forbid_user_namespaces

MAX_FDS = 1 << 20  # (os.closerange closes them with one close_range(2))
CLONE_NEW = {"mnt": 0x00020000, "net": 0x40000000, "ipc": 0x08000000, "uts": 0x04000000, "pid": 0x20000000,
             "user": 0x10000000}
PR_CAPBSET_DROP = 24
# a container's root's, as Docker and Podman give them (CHOWN, DAC_OVERRIDE, FOWNER, FSETID, KILL, SETGID, SETUID,
# SETPCAP, NET_BIND_SERVICE, NET_RAW, SYS_CHROOT, MKNOD, AUDIT_WRITE, SETFCAP): over an image, held in the image's
# user namespace, so that they act only on what it maps (the image's files, the episode's processes)
CONTAINER_CAPABILITIES = (0, 1, 3, 4, 5, 6, 7, 8, 10, 13, 18, 27, 29, 31)
CAPABILITY_VERSION_3 = 0x20080522  # capset(2): two 32-bit words for each set


class _CapabilityHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapabilityData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


@dataclass(frozen=True)
class Entry:
    """What a forked process needs to enter a sandbox (picklable: it travels to the fork server)."""

    pid: int  # a process inside every namespace of the sandbox (bubblewrap's init)
    uid: int  # the episode's own, unprivileged (or the server's, shared, in a user namespace of the sandbox's own)
    cgroup: Cgroup | None
    own_user_namespace: bool = False  # the sandbox's user namespace is its own, not the server's
    image_users: int | None = None  # over an image: a process in the user namespace of its users, joined last
    gid: int | None = None  # its group, where not the uid's number (an image's USER app:staff)
    # capabilities its root keeps (over an image: a container's, which hold only in the image's user namespace)
    capabilities: tuple[int, ...] = ()


@functools.cache
def _last_capability() -> int:
    with open("/proc/sys/kernel/cap_last_cap") as file:
        return int(file.read())


@functools.cache
def _may_drop_groups() -> bool:
    """Whether setgroups(2) is allowed here: a user namespace that maps only its creator's ids denies it, so that
    nobody drops a group that denies them access."""
    try:
        with open("/proc/self/setgroups") as file:
            return file.read().strip() != "deny"
    except OSError:  # (a kernel older than the file: no such rule)
        return True


def warm_up() -> None:
    """Load and compile once what entering takes (the C library, the seccomp filter), so that a process forked
    from this one does not do it again."""
    libc()
    _last_capability()
    _may_drop_groups()
    with contextlib.suppress(OSError):  # (then each program meets the error, and says it)
        compiled()


def _already_in(kind: str, pid: int) -> bool:
    return os.stat(f"/proc/self/ns/{kind}").st_ino == os.stat(f"/proc/{pid}/ns/{kind}").st_ino


def setns(fd: int, kind: str) -> None:
    if libc().setns(fd, CLONE_NEW[kind]) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"cannot enter the sandbox's {kind} namespace: {os.strerror(error)}")


def unshare(kind: str) -> None:
    if libc().unshare(CLONE_NEW[kind]) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"cannot make a {kind} namespace in the sandbox: {os.strerror(error)}")


def enter(entry: Entry, born_inside: bool = False, no_network: bool = False) -> None:
    """Move this process into the sandbox, unprivileged. A process `born_inside` the sandbox's PID namespace (the
    programs' fork server forks them there) returns as itself. Any other forks, and returns in the child that runs
    the program; the parent never returns: it exits with the child's exit code, or by the signal that ended it.
    `no_network`: a network namespace of its own, empty, rather than the sandbox's."""
    if entry.cgroup is not None:
        entry.cgroup.join()
    if _may_drop_groups():
        os.setgroups([])
    joined = ("user",) * entry.own_user_namespace + ("net", "uts", "mnt") + (() if born_inside else ("pid",))
    # (the user namespace first: it owns the others; the mount namespace before pid's: after it, /proc is the
    # sandbox's; one it shares already, the server's network for a public one, is not entered again: in a server's
    # own user namespace it could not be, the host's user namespace owning it)
    joined = tuple(kind for kind in joined if not _already_in(kind, entry.pid))
    namespaces = {kind: os.open(f"/proc/{entry.pid}/ns/{kind}", os.O_RDONLY) for kind in joined}
    if entry.image_users is not None:  # (last: the sandbox's other namespaces are the server's user namespace's)
        joined += ("user",)
        namespaces["user"] = os.open(f"/proc/{entry.image_users}/ns/user", os.O_RDONLY)
    try:
        for kind in joined:
            setns(namespaces[kind], kind)
    finally:
        for fd in namespaces.values():
            os.close(fd)
    unshare("ipc")
    if no_network:
        unshare("net")
    drop_privileges(entry.uid, entry.gid, entry.capabilities)
    forbid_user_namespaces()
    if born_inside:
        return
    child = os.fork()  # born in the sandbox's PID namespace
    if child == 0:
        die_with_parent(signal.SIGKILL)
        return
    os.closerange(0, MAX_FDS)  # (holding nothing: a pipe the child shares ends when the child ends, as its caller
    _, status = os.waitpid(child, 0)  # expects, subprocess's exec-error pipe among them)
    if os.WIFSIGNALED(status):  # ended the same way, so that whoever waits for this process learns the signal
        with contextlib.suppress(OSError, ValueError):  # (SIGKILL's and SIGSTOP's handlers cannot be set)
            signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
        os.kill(os.getpid(), os.WTERMSIG(status))
    os._exit(os.waitstatus_to_exitcode(status))


def drop_privileges(uid: int, gid: int | None = None, keep: tuple[int, ...] = ()) -> None:
    """Become `uid` (and `gid`, by default the group of that number) with no capability but `keep`, and none more to
    gain by exec: the bounding set emptied of the others first (which takes a capability), then the sets (a uid of 0
    would keep them all)."""
    for capability in range(_last_capability() + 1):
        if capability not in keep and libc().prctl(PR_CAPBSET_DROP, capability, 0, 0, 0) != 0:
            error = ctypes.get_errno()
            raise OSError(error, f"cannot drop the sandbox's capabilities: {os.strerror(error)}")
    gid = uid if gid is None else gid
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    header, sets = _CapabilityHeader(CAPABILITY_VERSION_3, 0), (_CapabilityData * 2)()
    for capability in keep if uid == 0 else ():
        word, bit = divmod(capability, 32)
        sets[word].effective |= 1 << bit
        sets[word].permitted |= 1 << bit
        sets[word].inheritable |= 1 << bit
    if libc().capset(ctypes.byref(header), sets) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"cannot drop the sandbox's capabilities: {os.strerror(error)}")

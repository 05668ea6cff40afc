"""One episode's sandbox: bubblewrap's namespaces held open by a small process, a control group, a uid.

    sandbox = await Sandbox.open(policy)
    spec.sandbox = sandbox.entry          # a program forked warm enters it (enter.py)
    listener = sandbox.listening_socket() # the model endpoint's address inside (network "model")
    sandbox.host_path("/work/out.txt")    # its files, read from outside while it lives
    if not await sandbox.renew():         # as new for another episode (pool.py keeps it), or else
        await sandbox.close()             # every process killed, every file gone

The holder is bubblewrap with a shell that says it is ready (the mount view is made by then) and sleeps: the
namespaces live as long as it does, and when it is killed, the kernel kills every process of the sandbox's PID
namespace with it. Renewing one kills its episode's processes (all in its control group, or without one, all its
own /proc lists: pidns.py), empties its file systems and gives it a uid never used by a live episode (where every
episode shares the server's uid, the same, in the sandbox's own user namespace): what is left of the episode before
is only what the kernel keeps of a namespace that no process of the episode can change (its hostname, its routes),
as in a new one. (A uid's keyrings would outlive it: its programs may not use them, seccomp.py.)

Over an image (policy.image: its files, rootfs.py), the episode is the image's root in a user namespace of its own
(ImageUsers), each of the image's folders an overlay of its own; such a sandbox is never renewed.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import json
import os
import socket
import weakref
from pathlib import Path

from openenv_gym.errors import EnvError, SandboxUnavailableError
from openenv_gym.sandbox import cgroups, overlay, pidns, wipe
from openenv_gym.sandbox.enter import CONTAINER_CAPABILITIES, Entry
from openenv_gym.sandbox.mounts import WORKDIR, bwrap_arguments, hosts_file
from openenv_gym.sandbox.netns import listening_socket
from openenv_gym.sandbox.policy import SandboxPolicy
from openenv_gym.sandbox.ports import close_port, into_sandbox
from openenv_gym.sandbox.rootfs import IDS as IMAGE_IDS
from openenv_gym.sandbox.rootfs import top_folders
from openenv_gym.sandbox.support import BWRAP, unavailable

HOLDER = ["sh", "-c", "echo ready && exec sleep infinity"]
ENVIRONMENT = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}  # bubblewrap's: no secrets
UID_BASE = 1 << 20  # episodes' uids: above every user's, a block of 65,536 per worker process
MIN_MAPPED = 1024  # uids a user namespace maps, at least, for each episode to have one of its own
_numbers = itertools.count()
_uids_in_use: set[int] = set()
_open: weakref.WeakSet[Sandbox] = weakref.WeakSet()  # this process's sandboxes, until closed
WRITABLE = ("/tmp", WORKDIR, "/dev/shm")  # its own file systems (mounts.py), emptied when it is renewed


def uid_range(uid_map: str) -> tuple[int, int, int] | None:
    """(the first of the episodes' uids, how many blocks of them, uids per block: one block per worker process),
    among the uids a user namespace maps (`uid_map`: /proc/self/uid_map). The host's maps them all: UID_BASE and
    up. A container's own user namespace (a Kubernetes pod with hostUsers: false) maps 65,536, and so does the user
    namespace of a server run by an ordinary user with subordinate uids (userns.py): their upper half. None where
    too few are mapped to give each episode its own (a server's user namespace that maps only its user's uid)."""
    ranges = [tuple(map(int, line.split()))[::2] for line in uid_map.splitlines() if line.strip()]
    if any(inside <= UID_BASE and inside + count >= UID_BASE + (4096 << 16) for inside, count in ranges):
        return UID_BASE, 4096, 1 << 16
    inside, count = max(ranges, key=lambda mapped: mapped[1])
    if count < MIN_MAPPED:
        return None
    return inside + count // 2, 16, count // 2 // 16


@functools.cache
def _uids() -> tuple[int, int, int] | None:
    with open("/proc/self/uid_map") as file:
        return uid_range(file.read())


def image_uids() -> tuple[int, int]:
    """(first, count) of the uids an image's files are owned by (rootfs.py), and its episodes are (as the image's
    uid 0 and up, in a user namespace of each sandbox's): a block of the host's no user has; in a user namespace
    that maps fewer, the lower half of its largest range (the episodes' are the upper half) less its uid 0; where
    it maps only the server's uid, that one."""
    if (uids := _uids()) is None:
        return os.geteuid(), 1
    first, blocks, size = uids
    if first == UID_BASE and blocks == 4096:
        return UID_BASE + blocks * size, IMAGE_IDS
    return first - size * blocks + 1, min(IMAGE_IDS, size * blocks - 1)


def shares_uid() -> bool:
    """Whether every episode has the server's uid (each sandbox then has a user namespace of its own, so that
    what a uid counts, its processes say, is counted per episode)."""
    return _uids() is None


def live_sandboxes() -> int:
    """How many sandboxes this process holds open."""
    return len(_open)


def _episode_uid() -> int:
    """A uid of this worker's block that no live episode has (the block is reused as the counter wraps); the
    server's own where every episode shares it."""
    if (uids := _uids()) is None:
        return os.geteuid()
    first, blocks, size = uids
    while (uid := first + (os.getpid() % blocks) * size + next(_numbers) % size) in _uids_in_use:
        pass
    _uids_in_use.add(uid)
    return uid


class ImageUsers:
    """The user namespace of a sandbox over an image: the image's uids 0 and up are the host's image_uids() (who
    own its exported files), held by a process of its own (bubblewrap's namespaces are the server's user
    namespace's, so that it makes them as it makes any sandbox's); the episode's processes join it last."""

    def __init__(self, holder: asyncio.subprocess.Process, base: int) -> None:
        self.holder, self.base = holder, base

    @classmethod
    async def open(cls) -> ImageUsers:
        base, count = image_uids()
        holder = await asyncio.create_subprocess_exec(
            "unshare", "--user", "--", *HOLDER, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env=ENVIRONMENT)
        try:
            if await holder.stdout.readline() != b"ready\n":  # type: ignore[union-attr]
                said = (await holder.stderr.read()).decode(errors="replace").strip()  # type: ignore[union-attr]
                raise EnvError(f"the image sandbox's user namespace could not be made: unshare said {said}")
            for kind in ("uid", "gid"):
                with open(f"/proc/{holder.pid}/{kind}_map", "w") as table:
                    table.write(f"0 {base} {count}\n")
        except BaseException:
            holder.kill()
            await holder.wait()
            raise
        return cls(holder, base)

    async def close(self) -> None:
        if self.holder.returncode is None:
            self.holder.kill()
        await self.holder.wait()


RESOLVER = "/etc/resolv.conf"


class Sandbox:
    def __init__(self, process: asyncio.subprocess.Process, pid: int, uid: int, cgroup: cgroups.Cgroup | None,
                 policy: SandboxPolicy, users: ImageUsers | None = None) -> None:
        self.process, self.pid, self.cgroup, self.policy, self.users = process, pid, cgroup, policy, users
        self.workdir = WORKDIR
        self._listener: socket.socket | None = None
        self.ports: list[asyncio.Task] = []  # forwarding the hosts it is allowed (policy.allow)
        self._kept: dict[str, set[Path]] | None = None  # of each folder it wipes, the folders that lead to a mount
        self._give_uid(uid)
        _open.add(self)

    def _give_uid(self, uid: int) -> None:
        """The episode's own uid: its working directory and its other folders are its, its processes enter as it."""
        for folder in (WORKDIR, *self.policy.writable):
            os.chown(self.host_path(folder), uid, uid)
        if self.users is not None:  # (the episode is the image's root: its uid 0 inside, the image's users' base)
            self.uid, self.entry = uid, Entry(self.pid, 0, self.cgroup, image_users=self.users.holder.pid,
                                              capabilities=CONTAINER_CAPABILITIES)
        else:
            self.uid, self.entry = uid, Entry(self.pid, uid, self.cgroup, own_user_namespace=shares_uid())
        self.oom_kills = self.cgroup.oom_kills() if self.cgroup is not None else 0

    @classmethod
    async def open(cls, policy: SandboxPolicy) -> Sandbox:
        reason = unavailable()
        if reason is not None:
            raise SandboxUnavailableError(reason)
        _first_in_this_process()
        namespaces = ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--hostname",
                      "sandbox"] + ([] if policy.network == "public" else ["--unshare-net"]) + \
            ["--unshare-user"] * (shares_uid() and policy.image is None)
        info, info_writer = os.pipe()
        given = [info_writer]
        if policy.allow or policy.image is not None:  # its /etc/hosts: names of the allowed hosts; localhost (an
            hosts, hosts_writer = os.pipe()            # image's own is the empty placeholder its engine mounts over)
            os.write(hosts_writer, hosts_file(policy))
            os.close(hosts_writer)
            given.append(hosts)
            namespaces += ["--perms", "0644", "--ro-bind-data", str(hosts), "/etc/hosts"]
        if policy.image is not None and policy.network == "public" and os.path.exists(RESOLVER):  # (the host's
            namespaces += ["--ro-bind", os.path.realpath(RESOLVER), RESOLVER]  # network: its resolver, as engines do)
        try:
            process = await asyncio.create_subprocess_exec(
                BWRAP, *bwrap_arguments(policy), *namespaces, "--cap-drop", "ALL", "--die-with-parent", "--info-fd",
                str(info_writer),
                "--", *HOLDER, pass_fds=given, stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=ENVIRONMENT)
        finally:
            for fd in given:
                os.close(fd)
        users, cgroup = None, None
        try:
            if await process.stdout.readline() != b"ready\n":  # type: ignore[union-attr]
                said = (await process.stderr.read()).decode(errors="replace").strip()  # type: ignore[union-attr]
                raise EnvError(f"the episode's sandbox did not start: bubblewrap said {said or 'nothing'}")
            pid = json.loads(_read_all(info))["child-pid"]  # (written and closed before its command ran: no wait)
            if policy.image is not None:
                users = await ImageUsers.open()
            uid = users.base if users is not None else _episode_uid()
            cgroup = cgroups.create(f"{os.getpid()}-{uid}-{pid}" if users else f"{os.getpid()}-{uid}",
                                    policy.processes, policy.memory_bytes, policy.cpus)  # (a few writes)
            sandbox = cls(process, pid, uid, cgroup, policy, users)
            tops = tuple(top for top in top_folders(Path(policy.image)) if top not in policy.writable) \
                if policy.image is not None else ()
            if policy.owned or tops:
                await overlay.own(pid, uid, policy.disk_bytes, policy.owned, tops)
            sandbox.ports = [into_sandbox(pid, port, host, inside) for host, port, inside in policy.allowed()]
            return sandbox
        except BaseException:
            process.kill()
            await process.wait()
            if users is not None:
                await users.close()
            if cgroup is not None:  # (made, and left empty by the kill: a sandbox that did not open leaves nothing)
                await cgroup.remove()
            raise
        finally:
            with contextlib.suppress(OSError):
                os.close(info)

    def host_path(self, inside: str) -> Path:
        """A path of the sandbox's as the server reaches it (while the sandbox lives)."""
        return Path(f"/proc/{self.pid}/root{inside}")

    def listening_socket(self) -> socket.socket:
        """The model endpoint's listening socket, on the sandbox's own loopback: a copy of the one socket made for
        the sandbox's life (a thread makes it, in its network namespace), for the episode to serve and close."""
        if self._listener is None:
            self._listener = listening_socket(self.pid)
        return self._listener.dup()

    def _refuse_waiting_connections(self) -> None:
        """Close the connections the episode before made to the model endpoint and nobody accepted."""
        if self._listener is not None:
            with contextlib.suppress(BlockingIOError):
                while True:
                    self._listener.accept()[0].close()

    def out_of_memory(self) -> bool:
        """Whether the memory bound killed one of this episode's processes."""
        return self.cgroup is not None and self.cgroup.oom_kills() > self.oom_kills

    async def renew(self) -> bool:
        """Make it as new for another episode; False if it cannot be cheaply (a process that would not die, more
        files than wipe.WIPE_BUDGET, overlays of system folders, whose upper layers may not change under them): then
        only close() leaves nothing. (Its System V IPC objects ended with its processes: each program has an IPC
        namespace of its own.)"""
        if self.process.returncode is not None or bool(self.policy.owned) or self.policy.image is not None or \
                not await self._kill_all():
            return False
        if not all(wipe.empty(self.host_path(folder), kept) for folder, kept in self._leading_to_mounts().items()):
            return False
        os.chmod(self.host_path(WORKDIR), 0o700)
        for folder in self.policy.writable:
            os.chmod(self.host_path(folder), 0o755)
        self._refuse_waiting_connections()
        _uids_in_use.discard(self.uid)
        self._give_uid(_episode_uid())
        return True

    async def _kill_all(self) -> bool:
        """Kill every process of its episode: those of its control group, or without one, of its PID namespace."""
        if self.cgroup is not None:
            return await self.cgroup.kill_all()
        return await pidns.kill_all(str(self.host_path("/proc")), cgroups.REMOVE_WAIT)

    def _leading_to_mounts(self) -> dict[str, set[Path]]:
        """Each folder of its own that a renewal empties, and the folders in it that lead to a mount (read once:
        no process of an episode may mount)."""
        if self._kept is None:
            with open(f"/proc/{self.pid}/mountinfo") as table:
                points = [line.split()[4].encode().decode("unicode_escape") for line in table]
            self._kept = {folder: {self.host_path(inside) for inside in wipe.leading_to_mounts(points, folder)}
                          for folder in (*WRITABLE, *self.policy.writable)}
        return self._kept

    async def close(self) -> None:
        """Kill everything in it, and leave nothing: its files were in its own file systems, gone with it."""
        _open.discard(self)
        if self.process.returncode is None:
            self.process.kill()  # the holder's init dies with it (die-with-parent), and its PID namespace with that
        await self.process.wait()
        for port in self.ports:
            close_port(port)
        if self._listener is not None:
            self._listener.close()
        _uids_in_use.discard(self.uid)
        if self.users is not None:
            await self.users.close()
        if self.cgroup is not None:
            await self.cgroup.remove()


@functools.cache
def _first_in_this_process() -> None:
    cgroups.remove_orphans()  # of workers killed before they cleaned up


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    return b"".join(chunks)


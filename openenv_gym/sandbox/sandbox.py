"""One episode's sandbox: bubblewrap's namespaces held open by a small process, a control group, a uid.

    sandbox = await Sandbox.open(policy)
    spec.sandbox = sandbox.entry          # a program forked warm enters it (enter.py)
    listener = sandbox.listening_socket() # the model endpoint's address inside (network "model")
    sandbox.host_path("/work/out.txt")    # its files, read from outside while it lives
    await sandbox.close()                 # every process killed, every file gone

The holder is bubblewrap with a shell that says it is ready (the mount view is made by then) and sleeps: the
namespaces live as long as it does, and when it is killed, the kernel kills every process of the sandbox's PID
namespace with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import json
import os
import socket
from pathlib import Path

from openenv_gym.errors import EnvError, SandboxUnavailableError
from openenv_gym.sandbox import cgroups
from openenv_gym.sandbox.enter import Entry
from openenv_gym.sandbox.mounts import WORKDIR, bwrap_arguments
from openenv_gym.sandbox.netns import listening_socket
from openenv_gym.sandbox.policy import SandboxPolicy
from openenv_gym.sandbox.support import BWRAP, unavailable

HOLDER = ["sh", "-c", "echo ready && exec sleep infinity"]
ENVIRONMENT = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}  # bubblewrap's: no secrets
UID_BASE = 1 << 20  # episodes' uids: above every user's, a block of 65,536 per worker process
_numbers = itertools.count()


def _episode_uid() -> int:
    return UID_BASE + ((os.getpid() % 4096) << 16) + (next(_numbers) & 0xFFFF)


class Sandbox:
    def __init__(self, process: asyncio.subprocess.Process, pid: int, uid: int, cgroup: cgroups.Cgroup | None,
                 policy: SandboxPolicy) -> None:
        self.process, self.pid, self.uid, self.cgroup, self.policy = process, pid, uid, cgroup, policy
        self.entry = Entry(pid, uid, cgroup)
        self.workdir = WORKDIR

    @classmethod
    async def open(cls, policy: SandboxPolicy) -> Sandbox:
        reason = unavailable()
        if reason is not None:
            raise SandboxUnavailableError(reason)
        _first_in_this_process()
        namespaces = ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--hostname",
                      "sandbox"] + ([] if policy.network == "public" else ["--unshare-net"])
        info, info_writer = os.pipe()
        try:
            process = await asyncio.create_subprocess_exec(
                BWRAP, *bwrap_arguments(policy), *namespaces, "--die-with-parent", "--info-fd", str(info_writer),
                "--", *HOLDER, pass_fds=(info_writer,), stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=ENVIRONMENT)
        finally:
            os.close(info_writer)
        try:
            if await process.stdout.readline() != b"ready\n":  # type: ignore[union-attr]
                said = (await process.stderr.read()).decode(errors="replace").strip()  # type: ignore[union-attr]
                raise EnvError(f"the episode's sandbox did not start: bubblewrap said {said or 'nothing'}")
            pid = json.loads(_read_all(info))["child-pid"]  # (written and closed before its command ran: no wait)
            uid = _episode_uid()
            os.chown(f"/proc/{pid}/root{WORKDIR}", uid, uid)
            cgroup = cgroups.create(f"{os.getpid()}-{uid}", policy.processes, policy.memory_bytes)  # (a few writes)
        except BaseException:
            process.kill()
            await process.wait()
            raise
        finally:
            with contextlib.suppress(OSError):
                os.close(info)
        return cls(process, pid, uid, cgroup, policy)

    def host_path(self, inside: str) -> Path:
        """A path of the sandbox's as the server reaches it (while the sandbox lives)."""
        return Path(f"/proc/{self.pid}/root{inside}")

    def listening_socket(self) -> socket.socket:
        """The model endpoint's listening socket, on the sandbox's own loopback."""
        return listening_socket(self.pid)

    def out_of_memory(self) -> bool:
        return self.cgroup is not None and self.cgroup.out_of_memory()

    async def close(self) -> None:
        """Kill everything in it, and leave nothing: its files were in its own file systems, gone with it."""
        if self.process.returncode is None:
            self.process.kill()  # the holder's init dies with it (die-with-parent), and its PID namespace with that
        await self.process.wait()
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


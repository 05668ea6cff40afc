"""Where an episode's programs run: its sandbox (sandbox/), or, only when the server was told --no-sandbox, a
temporary folder of the host's. Every adapter whose episodes run programs takes its place from here, so that none
runs them its own way.

    place = await Workplace.open(policy, sandboxed)   # policy: the manifest's network and limits
    lease = await endpoint.open(ask, model, place.listener())
    spec = ProgramSpec(workdir=place.workdir, sandbox=place.entry, environ=place.environ(environ), ...)
    program = await Program.start(spec, place.host_workdir)
    await place.close()                                # its processes killed, its files gone (the
                                                       # sandbox renewed for another episode: pool.py)
"""

from __future__ import annotations

import asyncio
import posixpath
import shutil
import socket
import tempfile
from pathlib import Path

from openenv_gym.sandbox import WORKDIR, Entry, Sandbox, SandboxPolicy, pool
from openenv_gym.sandbox.paths import read_inside

HOME = WORKDIR  # a sandboxed program's home: its working directory (the server's own is hidden from it)


class Workplace:
    def __init__(self, workdir: str, host_workdir: Path, sandbox: Sandbox | None) -> None:
        self.workdir, self.host_workdir, self.sandbox = workdir, host_workdir, sandbox
        self.entry: Entry | None = sandbox.entry if sandbox is not None else None

    @classmethod
    async def open(cls, policy: SandboxPolicy, sandboxed: bool, prefix: str = "openenv-gym-") -> Workplace:
        if not sandboxed:
            folder = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix=prefix))
            return cls(str(folder), folder, None)
        sandbox = await pool.take(policy)
        return cls(sandbox.workdir, sandbox.host_path(sandbox.workdir), sandbox)

    def listener(self) -> socket.socket | None:
        """The model endpoint's address inside the sandbox, where the program may reach it (None: the worker's)."""
        if self.sandbox is None or self.sandbox.policy.network != "model":
            return None
        return self.sandbox.listening_socket()

    def environ(self, environ: dict[str, str]) -> dict[str, str]:
        """A program's environment, with a home and temporary folder it may write in its sandbox."""
        if self.sandbox is None:
            return environ
        return {**environ, "HOME": HOME, "TMPDIR": "/tmp"}

    async def read(self, path: str, max_bytes: int | None = None) -> bytes:
        """The first `max_bytes` (None: all) of a file its programs left (`path` relative to the working directory),
        resolved in the sandbox (sandbox/paths.py: a link they made leads to no file of the host's). Raises OSError."""
        if self.sandbox is None:
            with open(self.host_workdir / path, "rb") as file:
                return file.read(max_bytes)
        return await asyncio.to_thread(read_inside, self.sandbox.pid, posixpath.join(self.workdir, path), max_bytes)

    def out_of_memory(self) -> bool:
        """Whether the memory bound of the episode's processes killed one of them."""
        return self.sandbox is not None and self.sandbox.out_of_memory()

    async def close(self) -> None:
        if self.sandbox is not None:
            await pool.give_back(self.sandbox)  # renewed for the next episode, or closed
        else:  # a few small files: inline (a thread per close would outlive a stopping server)
            shutil.rmtree(self.host_workdir, True)

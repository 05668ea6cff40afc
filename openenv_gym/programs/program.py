"""Episode programs on the worker's side: started from a warm fork server, watched, killed with their group.

Each program is forked from the programs' fork server (forkserver.py), a process that imported what the programs
need once (`preload`), so an episode does not pay a cold interpreter: a command is exec'd from the fork, an entry
function runs in it. Its output goes to files in its working directory, bounded by its file size limit, and is read
back (the tail) when it ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pickle
import signal
import socket
import stat
import subprocess
import sys
import threading
from pathlib import Path
from typing import NamedTuple

from openenv_gym.programs.child import ProgramSpec
from openenv_gym.programs.forkserver import NUMBER, REQUEST
from openenv_gym.runtime.lifetime import FORK_SERVER

TAIL_BYTES = 64 * 1024  # of stdout and of stderr, read back when a program ends
_preloaded: list[str] | None = None
_starting = threading.Lock()
_server: _ForkServer | None = None


def warm_up(preload: list[str]) -> None:
    """Name the modules the fork server imports once (before it starts: the first program starts it)."""
    global _preloaded
    if _preloaded is None:
        _preloaded = list(preload)


class _ForkServer:
    """The fork server of this process, started with FORK_SERVER in its environment: there `import openenv_gym`
    stays light (every program is a copy of the fork server)."""

    def __init__(self, preload: list[str]) -> None:
        self.owner = os.getpid()  # (a process forked from this one needs a fork server of its own)
        self.channel, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        settings = {"channel": theirs.fileno(), "preload": preload, "sys_path": sys.path}
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-c", "from openenv_gym.programs.forkserver import main; main()",
                 json.dumps(settings)],
                pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, env={**os.environ, FORK_SERVER: "1"})
        finally:
            theirs.close()
        self.channel.setblocking(False)
        self._writable: asyncio.Future | None = None  # (one watch of the socket for all who wait to send)

    def usable(self) -> bool:
        return self.owner == os.getpid() and self.process.poll() is None

    async def ask(self, fds: list[int]) -> None:
        """Send a request with `fds`; wait while the socket's queue is full (every waiter woken when it is not)."""
        while True:
            try:
                socket.send_fds(self.channel, [REQUEST], fds)
                return
            except BlockingIOError:
                if self._writable is None or self._writable.done():
                    self._writable = asyncio.ensure_future(_ready(self.channel.fileno(), writing=True))
                await asyncio.shield(self._writable)


def _fork_server() -> _ForkServer:
    global _server
    with _starting:
        if _server is None or not _server.usable():
            _server = _ForkServer(_preloaded or [])
        return _server


async def _forked(spec: ProgramSpec) -> tuple[int, int]:
    """Have the fork server fork `spec`'s program; (its pid, the pipe its wait status will come through)."""
    request = os.memfd_create("openenv-gym-program")
    reports, report_writer = os.pipe()
    fds = [request, report_writer]
    try:
        os.write(request, pickle.dumps(spec))  # (a memfd takes any size at once: the request itself stays small)
        if spec.sandbox is not None:  # born in its PID namespace
            fds.append(os.open(f"/proc/{spec.sandbox.pid}/ns/pid", os.O_RDONLY))
        for attempt in range(2):
            try:
                await _fork_server().ask(fds)
                break
            except (BrokenPipeError, ConnectionError):  # it ended (killed?): once more, with a new one
                if attempt:
                    raise OSError("the programs' fork server ends as it starts: its error is in the server's "
                                  "output above") from None
        answer = await _read(reports, NUMBER.size)
        if len(answer) < NUMBER.size:
            raise OSError("the programs' fork server ended before it started the program (killed?): try again")
        pid = NUMBER.unpack(answer)[0]
    except BaseException:
        os.close(reports)
        raise
    finally:
        for fd in fds:
            os.close(fd)
    if pid < 0:
        os.close(reports)
        raise OSError(-pid, f"the fork server could not start the program: {os.strerror(-pid)}")
    return pid, reports


async def _read(fd: int, size: int) -> bytes:
    """`size` bytes from pipe `fd`, waiting for them on the event loop (fewer if it closes first)."""
    await _ready(fd, writing=False)
    return os.read(fd, size)


async def _ready(fd: int, writing: bool) -> None:
    """Wait until `fd` can be written to (`writing`) or read from."""
    loop = asyncio.get_running_loop()
    ready = loop.create_future()
    watch, unwatch = (loop.add_writer, loop.remove_writer) if writing else (loop.add_reader, loop.remove_reader)
    watch(fd, lambda: ready.done() or ready.set_result(None))
    try:
        await ready
    finally:
        unwatch(fd)


class Program:
    """One running program: wait for it, kill its process group, read what it printed."""

    def __init__(self, pid: int, reports: int, spec: ProgramSpec, host_workdir: Path) -> None:
        self.pid, self.exitcode = pid, None
        self.outputs = [host_workdir / name for name in spec.output_files]
        self._exited: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._waiting = asyncio.ensure_future(self._wait_for_end(reports))

    @classmethod
    async def start(cls, spec: ProgramSpec, host_workdir: Path | None = None) -> Program:
        """Start `spec`; `host_workdir` is where the server reads its working directory (a sandbox's differs)."""
        pid, reports = await _forked(spec)
        return cls(pid, reports, spec, host_workdir or Path(spec.workdir))

    async def _wait_for_end(self, reports: int) -> None:
        """The fork server writes the wait status when the program ends; nothing if it ended first (killed: then so
        were its programs)."""
        try:
            report = await _read(reports, NUMBER.size)
        finally:
            os.close(reports)
        status = NUMBER.unpack(report)[0] if len(report) == NUMBER.size else None
        self.exitcode = -signal.SIGKILL if status is None else os.waitstatus_to_exitcode(status)
        if not self._exited.done():
            self._exited.set_result(self.exitcode)

    async def wait(self) -> int:
        """The exit code; -N when signal N ended it."""
        return await asyncio.shield(self._exited)

    def kill(self) -> None:
        """SIGKILL to its whole process group (what it started included)."""
        if self._exited.done():
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):  # before its setsid, it has no group of its own yet
            os.kill(self.pid, signal.SIGKILL)

    def output(self) -> tuple[str, str]:
        """The tails of its stdout and stderr."""
        stdout, stderr = self.outputs
        return _tail(stdout), _tail(stderr)


class Finished(NamedTuple):
    exit_code: int  # -N: signal N ended it
    stdout: str  # the tails of its output
    stderr: str
    timed_out: bool  # killed past its timeout


async def run_to_end(spec: ProgramSpec, host_workdir: Path, timeout: float | None = None) -> Finished:
    """Run a program to its end, killed past `timeout` seconds. Its output files are removed after."""
    program = await Program.start(spec, host_workdir)
    timed_out = False
    try:
        code = await asyncio.wait_for(program.wait(), timeout)
    except TimeoutError:
        program.kill()
        code, timed_out = await program.wait(), True
    finally:
        program.kill()
    stdout, stderr = program.output()
    for path in program.outputs:  # (a link the program put there is removed, never followed)
        path.unlink(missing_ok=True)
    return Finished(code, stdout, stderr, timed_out)


def _tail(path: Path) -> str:
    """The end of an output file the program wrote in its working directory. Never through a link it put in its
    place (the server reads as root), nor from a FIFO (it would wait)."""
    try:
        with open(os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK), "rb") as file:
            if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
                return ""
            file.seek(max(0, file.seek(0, os.SEEK_END) - TAIL_BYTES))
            return file.read().decode("utf-8", "replace")
    except OSError:
        return ""

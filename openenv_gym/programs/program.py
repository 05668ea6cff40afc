"""Episode programs on the worker's side: started from a warm fork server, watched, killed with their group.

Each program is forked from multiprocessing's fork server, a process that imported what the programs need once
(`preload`), so an episode does not pay a cold interpreter: a command is exec'd from the fork, an entry function
runs in it. Its output goes to files in its working directory, bounded by its file size limit, and is read back
(the tail) when it ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import signal
import stat
import threading
from multiprocessing import forkserver
from pathlib import Path
from typing import NamedTuple

from openenv_gym.programs.child import ProgramSpec, run
from openenv_gym.runtime.lifetime import FORK_SERVER

TAIL_BYTES = 64 * 1024  # of stdout and of stderr, read back when a program ends
_CONTEXT = multiprocessing.get_context("forkserver")
_preloaded: list[str] | None = None
_starting = threading.Lock()


def warm_up(preload: list[str]) -> None:
    """Name the modules the fork server imports once (before it starts: the first program starts it)."""
    global _preloaded
    if _preloaded is None:
        _preloaded = ["openenv_gym.programs.child", *preload]
        _CONTEXT.set_forkserver_preload(_preloaded)


def _start_fork_server() -> None:
    """Start the fork server, with FORK_SERVER in the environment it inherits: there `import openenv_gym` stays
    light (every program is a copy of the fork server). multiprocessing gives it this process's environment, so the
    name is set only while it starts; the programs' own environment is their spec's."""
    with _starting:
        if forkserver._forkserver._forkserver_pid is not None:  # (running: ensure_running checks it is alive)
            forkserver.ensure_running()
            return
        os.environ[FORK_SERVER] = "1"
        try:
            forkserver.ensure_running()
        finally:
            del os.environ[FORK_SERVER]


def _started(process: multiprocessing.process.BaseProcess) -> None:
    _start_fork_server()
    process.start()


class Program:
    """One running program: wait for it, kill its process group, read what it printed."""

    def __init__(self, process: multiprocessing.process.BaseProcess, spec: ProgramSpec, host_workdir: Path) -> None:
        self.process = process
        self.outputs = [host_workdir / name for name in spec.output_files]
        self._exited = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().add_reader(process.sentinel, self._on_exit)

    @classmethod
    async def start(cls, spec: ProgramSpec, host_workdir: Path | None = None) -> Program:
        """Start `spec`; `host_workdir` is where the server reads its working directory (a sandbox's differs)."""
        warm_up([])
        process = _CONTEXT.Process(target=run, args=(spec,), daemon=False)
        await asyncio.to_thread(_started, process)  # a round trip to the fork server: keep it off the event loop
        return cls(process, spec, host_workdir or Path(spec.workdir))

    def _on_exit(self) -> None:
        asyncio.get_running_loop().remove_reader(self.process.sentinel)
        self.process.join(0)
        if not self._exited.done():
            self._exited.set_result(self.process.exitcode)

    async def wait(self) -> int:
        """The exit code; -N when signal N ended it."""
        code = await asyncio.shield(self._exited)
        return -1 if code is None else code

    def kill(self) -> None:
        """SIGKILL to its whole process group (what it started included)."""
        if self._exited.done():
            return
        pid = self.process.pid
        if pid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):  # before its setsid, it has no group of its own yet
                os.kill(pid, signal.SIGKILL)

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

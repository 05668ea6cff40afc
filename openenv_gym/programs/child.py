"""What runs in an episode's program process, forked from the warm process (the programs' fork server).

The child leaves its parent's process group (so that the whole tree it starts is killed with it), enters the
episode's sandbox if it has one (sandbox/enter.py: the process that goes on is the sandbox's, unprivileged), takes
its limits, moves into the episode's working directory, sends its output to files there, and then either becomes
the command (exec), runs it here when it is a Python script (`python agent.py`: the modules the fork server
preloaded are imported already), or calls the entry function, whose return value it prints last, as JSON.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import os
import resource
import runpy
import signal
import sys
import threading
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openenv_gym.runtime.entries import import_from_folder
from openenv_gym.runtime.lifetime import die_with_parent
from openenv_gym.sandbox import Entry, enter

STDIN = ".stdin"  # in the working directory: what a program reads, if the episode wrote it


@dataclass(frozen=True)
class ProgramSpec:
    workdir: str
    environ: dict[str, str]  # the program's whole environment
    cpu_seconds: int
    memory_bytes: int  # per process, where no control group bounds the episode's (RLIMIT_DATA: see confine)
    output_bytes: int
    open_files: int
    command: list[str] | None = None  # exec'd, or else, when `script` is set, that Python script run in the fork
    script: bool = False  # command is [python, script.py | -m module, args...]: run it here, warm, no exec
    folder: str = ""  # or, without a command, the entry "module:function" in the folder of environment `name`
    name: str = ""
    entry: str = ""
    call: dict[str, Any] = field(default_factory=dict)  # the entry's keyword arguments
    output_prefix: str = ""  # its output goes to <prefix>.stdout and <prefix>.stderr in the working directory
    log: str = ""  # or, when set, both to this file
    sandbox: Entry | None = None  # the episode's sandbox, entered before anything else (None: unconfined)
    processes: int | None = None  # in the sandbox: its uid's processes at once (the cgroup bounds them too)
    no_network: bool = False  # in the sandbox: a network of its own, empty (a phase without network)

    @property
    def output_files(self) -> tuple[str, str]:
        return (self.log, self.log) if self.log else (f"{self.output_prefix}.stdout", f"{self.output_prefix}.stderr")


def run(spec: ProgramSpec, born_inside: bool = True) -> int:
    """The forked program's whole life (forkserver.py forks it, in its sandbox's PID namespace unless `born_inside`
    is False: then it enters by forking once more); its exit code. A program that raises exits with code
    1 and its traceback on stderr, from its own code down: the frames of this launcher are not the program's. As
    python does, it ends when its threads that are not daemons have ended too."""
    try:
        _run(spec, born_inside)
        for thread in threading.enumerate():
            if thread is not threading.current_thread() and not thread.daemon:
                thread.join()
        code = 0
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except BaseException as exc:
        frames = exc.__traceback__
        while frames is not None and (frames.tb_frame.f_code.co_filename in (__file__, runpy.__file__)
                                      or frames.tb_frame.f_code.co_filename == "<frozen runpy>"):
            frames = frames.tb_next
        traceback.print_exception(type(exc), exc, frames)
        code = 1
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # (a program may have closed or replaced them)
            stream.flush()
    return code


def _exit_code(code: object) -> int:
    """What python exits with after `sys.exit(code)`: None is 0, a number itself, anything else printed and 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def confine(spec: ProgramSpec, born_inside: bool = False) -> None:
    """Move this process into the program's sandbox (if it has one), under its limits, in its working directory.
    `born_inside`: forked in the sandbox's PID namespace already (by the fork server). (Also what a live process with
    pipes runs between its fork and its exec: Verifiers' open_process.)"""
    if spec.sandbox is not None:
        enter(spec.sandbox, born_inside, spec.no_network)
    limits = [(resource.RLIMIT_CPU, spec.cpu_seconds), (resource.RLIMIT_FSIZE, spec.output_bytes),
              (resource.RLIMIT_NOFILE, spec.open_files)]
    if spec.sandbox is None or spec.sandbox.cgroup is None:  # (else its control group bounds the episode's memory)
        # what a process writes, not the address space it reserves (RLIMIT_AS): Node's WebAssembly, Go and the JVM
        # reserve gigabytes they never use, and could not start under an address-space bound
        limits.append((resource.RLIMIT_DATA, spec.memory_bytes))
    if spec.processes is not None:  # (the uid is the episode's own: this counts the episode's processes only)
        limits.append((resource.RLIMIT_NPROC, spec.processes))
    for limit, value in limits:
        resource.setrlimit(limit, (value, value))
    os.chdir(spec.workdir)


def _run(spec: ProgramSpec, born_inside: bool) -> None:
    os.setsid()
    die_with_parent(signal.SIGKILL)  # the fork server ends with the worker: so does every program
    confine(spec, born_inside)
    os.environ.clear()
    os.environ.update(spec.environ)
    stdin = os.open(STDIN, os.O_RDONLY) if Path(STDIN).exists() else os.open(os.devnull, os.O_RDONLY)
    os.dup2(stdin, 0)
    opened: dict[str, int] = {}
    for fd, name in zip((1, 2), spec.output_files, strict=True):
        if name not in opened:
            opened[name] = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(opened[name], fd)
    if spec.command is not None and spec.script:  # `python script.py ...` or `python -m module ...`: run as python
        _run_python(spec.command[1:])             # would, in this interpreter, its modules preloaded
        return
    if spec.command is not None:
        try:
            os.execvpe(spec.command[0], spec.command, os.environ)
        except OSError as exc:
            os.write(2, f"cannot run {spec.command[0]!r}: {exc}\n".encode())
            os._exit(127)
    function = import_from_folder(spec.name, spec.folder, spec.entry)
    result = function(**_accepted(function, spec.call))
    if inspect.isawaitable(result):
        result = asyncio.run(_awaited(result))
    if result is not None:
        print(json.dumps(result, default=str), flush=True)
    sys.stdout.flush()


def _run_python(arguments: list[str]) -> None:
    """`python ARGUMENTS` (a script, or -m and a module), run in this process: sys.argv and sys.path as python would
    set them, PYTHONPATH's folders included (the fork server's path was fixed before the program's environment)."""
    extra = [entry for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep) if entry and entry not in sys.path]
    sys.path[1:1] = extra
    if arguments[0] == "-m":
        sys.argv = [arguments[1], *arguments[2:]]
        sys.path.insert(0, os.getcwd())
        runpy.run_module(arguments[1], run_name="__main__", alter_sys=True)
        return
    sys.argv = arguments
    sys.path.insert(0, os.path.dirname(arguments[0]))
    runpy.run_path(arguments[0], run_name="__main__")


def _accepted(function: Any, arguments: dict[str, Any]) -> dict[str, Any]:
    """The arguments a function names (all of them if it takes **kwargs): it takes what it needs."""
    parameters = inspect.signature(function).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return arguments
    names = {p.name for p in parameters}
    return {key: value for key, value in arguments.items() if key in names}


async def _awaited(awaitable: Any) -> Any:
    return await awaitable

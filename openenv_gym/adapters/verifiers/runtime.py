"""Where and how Verifiers v1 runs its programs: installed once in a v1 environment's worker, on Verifiers' local
subprocess runtime (every agent's runtime here).

Each runtime (a rollout's seat, a taskset's shared tool server) is a workplace of its own (../workplace.py): a
sandbox, or, served --no-sandbox, the runtime's own folder on the host. In a sandbox, every program the runtime
starts runs inside it (the harness, the commands it runs, a package's tool servers, the runtime's own shell steps):
forked warm where it can be (warm_programs.py), exec'd otherwise. Its files are read and written through the
sandbox's root; a service of the server's it must reach (the interception server, a tool server in another
runtime) gets a port inside its network, and a service it runs gets one on the host's loopback (sandbox/ports.py):
nothing else crosses. Unsandboxed, only the warm programs leave the runtime's own way.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import shutil
import signal
import subprocess
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from openenv_gym.adapters.verifiers.warm_programs import WarmScripts, preload
from openenv_gym.adapters.workplace import Workplace
from openenv_gym.programs import Program, ProgramSpec, confine, inherited_environ, run_to_end
from openenv_gym.sandbox import WORKDIR, SandboxPolicy
from openenv_gym.sandbox.paths import write_inside
from openenv_gym.sandbox.ports import close_port, into_sandbox, out_of_sandbox

LOOPBACK = ("127.0.0.1", "localhost")
REPLACED = ("prepare_uv_script", "start", "run", "run_program", "run_background", "open_process", "_read", "write",
            "host_url", "expose", "teardown", "cleanup")  # Verifiers' own, kept for what stays its way
_outputs = itertools.count()


def install(tool_servers: bool, policy: SandboxPolicy, sandboxed: bool) -> None:
    """Route the subprocess runtime's programs as said above, once per process."""
    from verifiers.v1.errors import SandboxError
    from verifiers.v1.runtimes import ProgramResult
    from verifiers.v1.runtimes.subprocess import SubprocessProcess, SubprocessRuntime

    if getattr(SubprocessRuntime, "_openenv_gym", False):
        return
    preload(tool_servers)
    scripts = WarmScripts()
    own = {name: getattr(SubprocessRuntime, name) for name in REPLACED}

    def spec(runtime: Any, argv: list[str], env: dict[str, str], **output: str) -> ProgramSpec:
        """How a program runs: in the runtime's place, with the environment the runtime gives its programs."""
        place: Workplace | None = getattr(runtime, "openenv_place", None)
        environ = inherited_environ()
        environ.update(runtime.process_env(env))
        inside = place is not None and place.entry is not None
        return ProgramSpec(
            workdir=place.workdir if place is not None else str(runtime.workdir),
            environ=place.environ(environ) if place is not None else environ, cpu_seconds=policy.cpu_seconds,
            memory_bytes=policy.memory_bytes, output_bytes=policy.file_bytes, open_files=policy.open_files,
            command=list(argv), script=scripts.runs(argv), sandbox=place.entry if inside else None,
            processes=policy.processes if inside else None, **output)

    async def started(runtime: Any, argv: list[str], env: dict[str, str], **output: str) -> Program:
        return await Program.start(spec(runtime, argv, env, **output), runtime.workdir)

    async def finished(runtime: Any, argv: list[str], env: dict[str, str]) -> Any:
        """Run a program to its end: its exit code and output (from files in its working directory, then removed)."""
        done = await run_to_end(spec(runtime, argv, env, output_prefix=f".vf-program-{next(_outputs)}"),
                                runtime.workdir)
        return ProgramResult(exit_code=done.exit_code, stdout=done.stdout, stderr=done.stderr)

    def place_of(runtime: Any) -> Workplace | None:
        return getattr(runtime, "openenv_place", None)

    async def prepare_uv_script(self: Any, script: str | bytes, env: dict[str, str] | None = None, *,
                                activate: bool = True) -> list[str]:
        """A script run warm where this venv has its dependencies; else prepared as Verifiers prepares it (uv), and
        for a sandboxed runtime on the host: its dependencies are the env's own, as its venv's are, installed by the
        server into the script cache the sandbox reads (its uv cache there too), and the script runs inside."""
        argv = await scripts.prepare(self, script.decode() if isinstance(script, bytes) else script)
        if argv is not None:
            return argv
        place = place_of(self)
        if place is None or place.sandbox is None:
            return await own["prepare_uv_script"](self, script, env, activate=activate)
        cache = {"UV_CACHE_DIR": os.path.join(self.scripts_dir, "uv")}
        return await own["prepare_uv_script"](OnTheHost(self, own), script, {**(env or {}), **cache},
                                              activate=activate)

    async def start(self: Any) -> None:
        if not sandboxed:
            return await own["start"](self)
        self.openenv_place = place = await Workplace.open(policy, True, f"openenv-gym-{self.name}-")
        self.openenv_ports: list[Any] = []
        self.openenv_forwarded: set[int] = set()
        self.workdir = place.host_workdir
        self.info.id = str(place.host_workdir)

    async def run(self: Any, argv: list[str], env: dict[str, str]) -> Any:
        return await finished(self, argv, env) if place_of(self) else await own["run"](self, argv, env)

    async def run_program(self: Any, argv: list[str], env: dict[str, str]) -> Any:
        if place_of(self) or scripts.runs(argv):
            return await finished(self, argv, env)
        return await own["run_program"](self, argv, env)

    async def run_background(self: Any, argv: list[str], env: dict[str, str], log: str) -> None:
        """A program the runtime stops at its teardown (a tool server), as it stops its own background processes."""
        if not (place_of(self) or scripts.runs(argv)):
            return await own["run_background"](self, argv, env, log)
        self._background.append(Background(await started(self, argv, env, log=log)))

    async def open_process(self: Any, argv: list[str], env: dict[str, str]) -> Any:
        """A live process its caller talks to through pipes (an ACP harness's): exec'd, not forked warm (the pipes
        are asyncio's), and moved into the sandbox between its fork and its exec (programs.confine)."""
        if not place_of(self):
            return await own["open_process"](self, argv, env)
        program = spec(self, argv, env)
        process = await asyncio.create_subprocess_exec(
            *argv, env=program.environ, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, start_new_session=True, preexec_fn=partial(confine, program))
        self._background.append(process)
        return SubprocessProcess(process)

    async def _read(self: Any, path: str, max_bytes: int | None = None) -> bytes:
        """A file of the sandbox's, its path resolved inside it (paths.py: no link leads to the host's files)."""
        place = place_of(self)
        if place is None or place.sandbox is None:
            return await own["_read"](self, path, max_bytes)
        try:
            return await place.read(path, max_bytes)
        except FileNotFoundError:  # (as Verifiers' own read: a caller waiting for a file to appear expects it)
            raise
        except OSError as exc:
            raise SandboxError(f"read {path!r}: {exc}") from exc

    async def write(self: Any, path: str, data: bytes) -> None:
        place = place_of(self)
        if place is None or place.sandbox is None:
            return await own["write"](self, path, data)
        try:
            await asyncio.to_thread(write_inside, place.sandbox.pid, os.path.join(WORKDIR, path), data,
                                    place.sandbox.uid)
        except OSError as exc:
            raise SandboxError(f"write {path!r}: {exc}") from exc

    def host_url(self: Any, url: str) -> str:
        """A service of the server's, as a program in the sandbox reaches it: the same URL, whose port is forwarded
        into the sandbox's own network."""
        place = place_of(self)
        address = urlsplit(url)
        if place is None or place.sandbox is None or place.sandbox.policy.network == "public" or \
                address.hostname not in LOOPBACK or address.port is None:
            return own["host_url"](self, url)
        if address.port not in self.openenv_forwarded:
            self.openenv_forwarded.add(address.port)
            self.openenv_ports.append(into_sandbox(place.sandbox.pid, address.port))
        return url

    async def expose(self: Any, port: int) -> str:
        """A service the sandbox runs, as the server (and other runtimes) reach it: a port of the host's loopback."""
        place = place_of(self)
        if place is None or place.sandbox is None or place.sandbox.policy.network == "public":
            return await own["expose"](self, port)
        server = await out_of_sandbox(place.sandbox.pid, port)
        self.openenv_ports.append(server)
        return f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"

    async def teardown(self: Any) -> None:
        place = place_of(self)
        if place is None:
            return await own["teardown"](self)
        self.cleanup()
        await place.close()

    def cleanup(self: Any) -> None:
        """Stop what the runtime runs (its sandbox's processes die with the sandbox, which teardown closes)."""
        place = place_of(self)
        if place is None:
            return own["cleanup"](self)
        for program in self._background:  # (forked warm, a Background; a live process, asyncio's)
            if isinstance(program, Background):
                program.program.kill()
            elif program.returncode is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(program.pid, signal.SIGKILL)  # (its own session: the group is its pid)
        self._background = []
        for port in self.openenv_ports:
            close_port(port)
        self.openenv_ports = []

    replacements = {"prepare_uv_script": prepare_uv_script, "start": start, "run": run, "run_program": run_program,
                    "run_background": run_background, "open_process": open_process, "_read": _read, "write": write,
                    "host_url": host_url, "expose": expose, "teardown": teardown, "cleanup": cleanup}
    for name, method in replacements.items():
        setattr(SubprocessRuntime, name, method)
    SubprocessRuntime._openenv_gym = True


def script_pythons() -> list[str]:
    """Where the Pythons of uv scripts are (the one UV_PYTHON names, uv's own installs): the sandbox reads them, so
    that a script prepared on the host (prepare_uv_script, above) runs inside."""
    found = []
    named = os.environ.get("UV_PYTHON")
    if named and os.path.isabs(named):
        found.append(str(Path(named).resolve().parent.parent))
    uv = shutil.which("uv")
    if uv is not None:
        done = subprocess.run([uv, "python", "dir"], capture_output=True, text=True, timeout=30)
        if done.returncode == 0 and done.stdout.strip():
            found.append(done.stdout.strip())
    return found


class OnTheHost:
    """A sandboxed runtime whose file writes and shell steps are Verifiers' own, on the host, in its script cache
    (the rest is the runtime's)."""

    def __init__(self, runtime: Any, own: dict[str, Any]) -> None:
        self._runtime, self._own = runtime, own
        self.workdir = Path(runtime.scripts_dir)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._runtime, name)

    async def write(self, path: str, data: bytes) -> None:
        await self._own["write"](self, path, data)

    async def run(self, argv: list[str], env: dict[str, str]) -> Any:
        return await self._own["run"](self, argv, env)


class Background:
    """A forked program as the subprocess runtime keeps its background processes (asyncio's Process: pid,
    returncode, wait), so that its teardown signals and reaps it the same way."""

    def __init__(self, program: Program) -> None:
        self.program, self.pid = program, program.pid

    @property
    def returncode(self) -> int | None:
        return self.program.exitcode

    async def wait(self) -> int:
        return await self.program.wait()

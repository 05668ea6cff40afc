"""Verifiers v1 harness programs started warm: forked from a process that imported their packages once.

A v1 rollout runs its harness as a PEP 723 script (the null and bash harnesses' chat program imports openai, mcp
and httpx: about a second of CPU in a new interpreter), which Verifiers' subprocess runtime prepares with
`uv sync --script` and starts as a new process for every rollout, and again for every user turn of a multi-turn
env. Where every dependency the script declares is installed in this environment's own venv (the importer adds
them: manifests/verifiers_v1.py), the script is run instead by this interpreter, forked from the warm fork
server (programs.py) with those packages preloaded: the same program, its arguments, working directory and
environment as the runtime gives it, and the same result (exit code, output). Any other script, and every other
command, goes the runtime's way.

Only the worker process of a v1 environment installs this, on Verifiers' subprocess runtime class.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import logging
import os
import re
import sys
import tomllib
from functools import cache
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement

from openenv_gym.adapters.program_child import ProgramSpec
from openenv_gym.adapters.programs import Program, warm_up

log = logging.getLogger(__name__)

# (openai imports its resources, httpx its transport and anyio its backend only when first used: at every request
# of a fresh program, which costs more than the program's own work)
PRELOAD = ["openai", "openai.resources", "mcp", "mcp.client.session", "httpx", "httpcore", "anyio._backends._asyncio",
           "tenacity", "certifi"]
# what a package's tool servers import besides: preloaded only for tasksets that have tools, as a fork server that
# holds verifiers costs every harness program forked from it (a quarter of the null harness's rollouts/s)
TOOL_SERVER_PRELOAD = ["verifiers.v1"]
_SCRIPT_BLOCK = re.compile(r"^# /// script\s*$(.*?)^# ///\s*$", re.MULTILINE | re.DOTALL)
CPU_SECONDS, MEMORY_BYTES, OUTPUT_BYTES, OPEN_FILES = 3600, 8 * 2**30, 256 * 2**20, 4096


def script_dependencies(source: str) -> list[str] | None:
    """The dependencies a PEP 723 script declares; None if it has no script metadata."""
    match = _SCRIPT_BLOCK.search(source)
    if match is None:
        return None
    toml = "\n".join(line[2:] if line.startswith("# ") else line.lstrip("#") for line in match.group(1).splitlines())
    try:
        return list(tomllib.loads(toml).get("dependencies", []))
    except tomllib.TOMLDecodeError:
        return None


@cache
def missing_here(requirement: str) -> str | None:
    """Why `requirement` is not met by this interpreter's packages; None when it is."""
    try:
        wanted = Requirement(requirement)
    except InvalidRequirement:
        return f"{requirement!r} is not a requirement"
    if wanted.marker is not None and not wanted.marker.evaluate():
        return None
    try:
        version = importlib.metadata.version(wanted.name)
    except importlib.metadata.PackageNotFoundError:
        return f"{wanted.name} is not installed"
    if not wanted.specifier.contains(version, prereleases=True):
        return f"{wanted.name} {version} does not satisfy {requirement}"
    return None


def runs_warm(source: str) -> bool:
    dependencies = script_dependencies(source)
    if dependencies is None:
        return False
    reasons = [reason for reason in map(missing_here, dependencies) if reason]
    if reasons:
        log.info("a harness script runs through uv, cold: %s", "; ".join(reasons))
    return not reasons


def install(tool_servers: bool = False) -> None:
    """Route the subprocess runtime's script programs (and its `python -m` tool servers) through the fork server,
    once per process; `tool_servers`: the taskset has tools, whose servers' imports are preloaded too."""
    from verifiers.v1.runtimes import ProgramResult
    from verifiers.v1.runtimes.subprocess import SubprocessRuntime

    if getattr(SubprocessRuntime, "_openenv_gym_warm", False):
        return
    warm_up(PRELOAD + (TOOL_SERVER_PRELOAD if tool_servers else []))
    warm_scripts: set[str] = set()

    async def prepare_uv_script(self: Any, script: str | bytes, env: dict[str, str] | None = None, *,
                                activate: bool = True) -> list[str]:
        source = script.decode() if isinstance(script, bytes) else script
        if self.user is not None or not runs_warm(source):
            return await prepare(self, script, env, activate=activate)
        path = Path(self.scripts_dir) / f"{hashlib.sha256(source.encode()).hexdigest()}.py"
        if str(path) not in warm_scripts:
            path.parent.mkdir(parents=True, exist_ok=True)
            temporary = path.with_suffix(f".{os.getpid()}.tmp")
            temporary.write_text(source)
            temporary.replace(path)  # whole, for a concurrent reader
            warm_scripts.add(str(path))
        return [sys.executable, str(path)]

    async def warm_run_program(self: Any, argv: list[str], env: dict[str, str]) -> Any:
        if len(argv) < 2 or argv[0] != sys.executable or argv[1] not in warm_scripts:
            return await run_program(self, argv, env)
        program = await Program.start(_spec(self, argv, env, output_prefix=".vf-program"))
        try:
            code = await program.wait()
        finally:
            program.kill()
        stdout, stderr = program.output()
        return ProgramResult(exit_code=code, stdout=stdout, stderr=stderr)

    async def warm_run_background(self: Any, argv: list[str], env: dict[str, str], log: str) -> None:
        """A package's tool server (`python -m package.servers.x`, as Verifiers starts an MCP toolset), forked warm;
        the runtime stops it at its teardown as it stops its own background processes."""
        if len(argv) < 3 or argv[0] != sys.executable or argv[1] != "-m":
            return await run_background(self, argv, env, log)
        program = await Program.start(_spec(self, argv, env, log=log))
        self._background.append(Background(program))

    prepare, run_program = SubprocessRuntime.prepare_uv_script, SubprocessRuntime.run_program
    run_background = SubprocessRuntime.run_background
    SubprocessRuntime.prepare_uv_script = prepare_uv_script
    SubprocessRuntime.run_program = warm_run_program
    SubprocessRuntime.run_background = warm_run_background
    SubprocessRuntime._openenv_gym_warm = True


def _spec(runtime: Any, argv: list[str], env: dict[str, str], **output: str) -> ProgramSpec:
    """How a program runs: the runtime's working directory and environment (what it gives its programs)."""
    environ = {key: value for key, value in os.environ.items() if "API_KEY" not in key.upper()}
    environ.update(runtime.process_env(env))
    return ProgramSpec(workdir=str(runtime.workdir), environ=environ, cpu_seconds=CPU_SECONDS,
                       memory_bytes=MEMORY_BYTES, output_bytes=OUTPUT_BYTES, open_files=OPEN_FILES,
                       command=list(argv), script=True, **output)


class Background:
    """A forked program as the subprocess runtime keeps its background processes (asyncio's Process: pid,
    returncode, wait), so that its teardown signals and reaps it the same way."""

    def __init__(self, program: Program) -> None:
        self.program, self.pid = program, program.process.pid

    @property
    def returncode(self) -> int | None:
        return self.program.process.exitcode

    async def wait(self) -> int:
        return await self.program.wait()

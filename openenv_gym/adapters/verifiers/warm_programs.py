"""Which Verifiers v1 harness programs start warm: forked from a process that imported their packages once.

A v1 rollout runs its harness as a PEP 723 script (the null and bash harnesses' chat program imports openai, mcp
and httpx: about a second of CPU in a new interpreter), which Verifiers' subprocess runtime prepares with
`uv sync --script` and starts as a new process for every rollout, and again for every user turn of a multi-turn
env. Where every dependency the script declares is installed in this environment's own venv (the importer adds
them: manifests/verifiers_v1.py), the script is run instead by this interpreter, forked from the warm fork
server (programs.py) with those packages preloaded: the same program, its arguments, working directory and
environment as the runtime gives it, and the same result (exit code, output). Any other script goes the
runtime's way (runtime.py says where every program runs).
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

from openenv_gym.programs import warm_up

log = logging.getLogger(__name__)

# (openai imports its resources, httpx its transport and anyio its backend only when first used: at every request
# of a fresh program, which costs more than the program's own work)
PRELOAD = ["openai", "openai.resources", "mcp", "mcp.client.session", "httpx", "httpcore", "anyio._backends._asyncio",
           "tenacity", "certifi"]
# what a package's tool servers import besides: preloaded only for tasksets that have tools, as a fork server that
# holds verifiers costs every harness program forked from it (a quarter of the null harness's rollouts/s)
TOOL_SERVER_PRELOAD = ["verifiers.v1"]
_SCRIPT_BLOCK = re.compile(r"^# /// script\s*$(.*?)^# ///\s*$", re.MULTILINE | re.DOTALL)


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


class WarmScripts:
    """The harness scripts of this worker that run warm: written once where the runtime keeps its scripts, run by
    this interpreter (in the fork server) instead of a uv environment of their own."""

    def __init__(self) -> None:
        self.paths: set[str] = set()

    async def prepare(self, runtime: Any, source: str) -> list[str] | None:
        """The argv that runs `source` warm; None when it cannot (a dependency of it is not installed here)."""
        if runtime.user is not None or not runs_warm(source):
            return None
        path = Path(runtime.scripts_dir) / f"{hashlib.sha256(source.encode()).hexdigest()}.py"
        if str(path) not in self.paths:
            path.parent.mkdir(parents=True, exist_ok=True)
            temporary = path.with_suffix(f".{os.getpid()}.tmp")
            temporary.write_text(source)
            temporary.replace(path)  # whole, for a concurrent reader
            self.paths.add(str(path))
        return [sys.executable, str(path)]

    def runs(self, argv: list[str]) -> bool:
        """Whether `argv` runs warm: one of these scripts, or a package's tool server (`python -m package.x`)."""
        return len(argv) >= 2 and argv[0] == sys.executable and (argv[1] in self.paths or argv[1] == "-m")


def preload(tool_servers: bool) -> None:
    """What the fork server imports once; `tool_servers`: the taskset has tools, whose servers' imports too."""
    warm_up(PRELOAD + (TOOL_SERVER_PRELOAD if tool_servers else []))

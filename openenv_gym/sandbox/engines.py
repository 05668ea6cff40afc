"""The container engines this machine has: Docker (its daemon, at DOCKER_HOST or the default socket) and Podman (no
daemon). An engine counts only where it answers: a docker CLI whose daemon is down is none.

    found = available()              # [Engine("docker", "20.10.24", ...), Engine("podman", "4.3.1", ...)]
    engine = choose("podman")        # that one, or EngineUnavailableError saying why and what to do
    engine = choose(None)            # the first that works, or None: no engine here
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from dataclasses import dataclass

from openenv_gym.errors import OpenEnvGymError

ENGINES = ("docker", "podman")  # in the order the default picks them
ENGINE_VARIABLE = "OPENENV_GYM_ENGINE"  # the default engine of imports (docker, podman, none)
DOCKER_SOCKET = "unix:///var/run/docker.sock"
ANSWER_TIMEOUT = 30.0  # seconds an engine may take to say its version
VERSION = {"docker": ["docker", "version", "--format", "{{.Server.Version}}"],
           "podman": ["podman", "version", "--format", "{{.Client.Version}}"]}
INSTALL = {"docker": "install Docker (Debian: apt-get install docker.io) and start its daemon (dockerd)",
           "podman": "install Podman (Debian: apt-get install podman)"}


class EngineUnavailableError(OpenEnvGymError):
    """The container engine asked for is not there, or does not answer."""


@dataclass(frozen=True)
class Engine:
    name: str  # "docker" or "podman"
    version: str
    address: str  # where it answers: Docker's daemon socket, or "local" for Podman


def _address(name: str) -> str:
    return os.environ.get("DOCKER_HOST", DOCKER_SOCKET) if name == "docker" else "local"


def probe(name: str) -> Engine | str:
    """Engine `name` if it answers here; else why not."""
    if shutil.which(name) is None:
        return f"{name} is not installed: {INSTALL[name]}"
    try:
        done = subprocess.run(VERSION[name], capture_output=True, text=True, timeout=ANSWER_TIMEOUT)
    except subprocess.TimeoutExpired:
        return f"{name} did not answer within {ANSWER_TIMEOUT:g} s"
    said = done.stdout.strip()
    if done.returncode != 0 or not said:
        reason = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
        if name == "docker":
            return (f"docker does not answer at {_address(name)} ({reason}): start its daemon (dockerd), or set "
                    "DOCKER_HOST to where it listens")
        return f"podman does not answer ({reason})"
    return Engine(name, said, _address(name))


@functools.cache
def available() -> tuple[Engine, ...]:
    """The engines that answer here, in the default's order (asked once per process)."""
    return tuple(found for found in map(probe, ENGINES) if isinstance(found, Engine))


def choose(name: str | None) -> Engine | None:
    """Engine `name` ("docker" or "podman"), or with None the first that answers (None if none does)."""
    if name is None:
        return next(iter(available()), None)
    if name not in ENGINES:
        raise EngineUnavailableError(f"unknown container engine {name!r}: choose {' or '.join(ENGINES)}")
    found = probe(name)
    if isinstance(found, str):
        raise EngineUnavailableError(found)
    return found

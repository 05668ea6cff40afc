"""What an episode's sandbox allows: its network, and the bounds on what its processes may use."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Network = Literal["none", "model", "public"]
NETWORKS: tuple[Network, ...] = ("none", "model", "public")  # no network; only its model endpoint; the host's


@dataclass(frozen=True)
class SandboxPolicy:
    network: Network = "model"
    processes: int = 256  # at once, the program's and all it starts: a fork bomb stops here
    memory_bytes: int = 4 << 30  # resident, all its processes together (cgroups; rlimits bound each process too)
    cpu_seconds: int = 600  # per process
    open_files: int = 1024  # per process
    file_bytes: int = 16 << 20  # the largest file it may write, its stdout and stderr included
    disk_bytes: int = 512 << 20  # its working directory, its /tmp and its /dev/shm, each
    readable: tuple[str, ...] = field(default_factory=tuple)  # host paths it reads (the env's folder, its venv)

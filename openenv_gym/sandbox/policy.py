"""What an episode's sandbox allows: its network, and the bounds on what its processes may use."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Literal

Network = Literal["none", "model", "public"]
NETWORKS: tuple[Network, ...] = ("none", "model", "public")  # no network; only its model endpoint; the host's
ALLOWED_NAMES = "127.0.1."  # inside a sandbox, the allowed host names' addresses: 127.0.1.1, 127.0.1.2, ...


@dataclass(frozen=True)
class SandboxPolicy:
    network: Network = "model"
    processes: int = 256  # at once, the program's and all it starts: a fork bomb stops here
    memory_bytes: int = 4 << 30  # all its processes together (its control group; without one, each process's data)
    cpus: float | None = None  # CPU time, in cores' worth, all its processes together (its control group's)
    cpu_seconds: int = 600  # per process
    open_files: int = 1024  # per process
    file_bytes: int = 16 << 20  # the largest file it may write, its stdout and stderr included
    disk_bytes: int = 512 << 20  # its working directory, its /tmp and its /dev/shm, each
    readable: tuple[str, ...] = field(default_factory=tuple)  # host paths it reads (the env's folder, its venv)
    allow: tuple[str, ...] = ()  # "host:port"s it reaches besides (network "model" or "none"), through the server
    # more folders of its own (absolute paths: a Harbor task's /app and /logs), each an empty size-bounded file system
    # that its episode owns; top-level ones, or in a folder the sandbox hides (mounts.py)
    writable: tuple[str, ...] = ()
    owned: tuple[str, ...] = ()  # paths in the system's folders it writes, as an image's build would (overlay.py)
    shown: tuple[tuple[str, str], ...] = ()  # (host file, where it is inside): files it reads at the root (a task's
    # /entrypoint.sh), read-only
    image: str | None = None  # an image's exported root (rootfs.py) the sandbox shows instead of the host's: each
    # episode root there, writing in overlays of its own

    def allowed(self) -> list[tuple[str, int, str]]:
        """(host, port, the address it has inside) of each allowed "host:port": a loopback address is itself (the
        host's service of that port), a name gets one of ALLOWED_NAMES (the sandbox's /etc/hosts says which)."""
        found, names = [], {}
        for entry in self.allow:
            host, port = allowed_address(entry)
            inside = host if _is_ip(host) else names.setdefault(host, f"{ALLOWED_NAMES}{len(names) + 1}")
            found.append((host, port, inside))
        return found


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def allowed_address(entry: str) -> tuple[str, int]:
    """("host", port) of an allow-list entry "host:port"; ValueError saying what is wrong with it."""
    host, _, port = entry.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{entry!r}: an allowed address is \"host:port\", e.g. \"pypi.org:443\"")
    if _is_ip(host) and not ipaddress.ip_address(host).is_loopback:
        raise ValueError(f"{entry!r}: name the host (its name is what the sandbox resolves), or a loopback address "
                         "for a service of the server's machine")
    if host == "127.0.0.1" and int(port) == 80:
        raise ValueError(f"{entry!r}: port 80 of a sandbox's 127.0.0.1 is its model endpoint's")
    return host, int(port)

"""What a server is started with. The defaults live here only: the CLI and `openenv_gym.serve` read them."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from openenv_gym.protocol.native import DEFAULT_MAX_FRAME_BYTES, DEFAULT_MAX_SESSIONS


@dataclass(frozen=True)
class Limits:
    max_sessions: int = DEFAULT_MAX_SESSIONS  # sessions the whole server (all workers) holds at once
    step_timeout: float = 60.0  # seconds one reset or step may take before its session is ended
    idle_timeout: float = 900.0  # seconds a session may sit unused before it is reaped
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES  # larger request frames are answered with too_large
    max_action_chars: int = 2**18  # longer text actions are answered with an invalid-action observation
    frame_timeout: float = 30.0  # seconds a frame may stay incomplete before its connection is cut
    resume_window: float = 60.0  # seconds a dropped connection's sessions are kept for it to resume (0: never)
    group_timeout: float = 600.0  # seconds a GRPO group's finished episodes are kept for its score to be asked


@dataclass(frozen=True)
class ServeConfig:
    env: str  # an environment name or the path of a folder holding an openenv.toml
    host: str = "127.0.0.1"
    port: int = 8000
    workers: int = field(default_factory=lambda: os.cpu_count() or 1)
    token: str | None = None
    limits: Limits = field(default_factory=Limits)
    # Threads per worker for environment code that would block the event loop: plain-def methods of
    # python environments, and the plain-def calls (and class construction) of ORS environments.
    threads: int = 32
    env_args: dict[str, Any] = field(default_factory=dict)  # verifiers: arguments of load_environment()
    ping_interval: float | None = None  # server pings; off: clients may not read while the model thinks
    reveal_tasks: bool = False  # task listings (GET /tasks, the tasks op) hold the tasks' hidden parts (answers)
    web: bool = True  # the playground page, GET /web
    sandbox: bool = True  # episodes that run programs run them in a sandbox each; False: unconfined (--no-sandbox)
    engine: str | None = None  # the container engine whose images Harbor tasks play in (None: the import's)
    # the Unix socket of the task sampler the server shares with rollout workers (sampling/host.py; None: none)
    sampler_socket: str | None = None


def reachable_host(host: str) -> str:
    """The address a process of this machine reaches a server listening on `host` at (loopback for a wildcard)."""
    return {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "::1"}.get(host, host)


def netloc(host: str, port: int) -> str:
    """host:port, an IPv6 address in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

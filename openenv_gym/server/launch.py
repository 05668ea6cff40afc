"""`openenv_gym.serve(...)`: everything `openenv-gym serve` does (the CLI is a thin layer over it).

    openenv_gym.serve("echo", port=8000)           # blocks until SIGTERM or SIGINT
    openenv_gym.serve("ors-myenv", workers=4)      # an imported env: runs in its own virtual environment

An environment with dependencies of its own runs in their virtual environment: serve() builds it on first
use and runs the server there, in a child process it waits for (signals are passed on). Whoever started
the server learns that it is ready, and its URL, through `ready_fd` (see protocol/ready.py) or `on_ready`.
"""

from __future__ import annotations

import json
import logging
import os
import resource
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any

from openenv_gym.errors import SandboxUnavailableError, ServerStartError
from openenv_gym.manifests import find_manifest
from openenv_gym.manifests.venvs import ensure_venv, in_venv, needs_venv, venv_path, venv_ready
from openenv_gym.protocol.ready import read_status, status_line
from openenv_gym.sandbox import mode, refusal, unavailable, userns
from openenv_gym.server.config import Limits, ServeConfig, netloc, reachable_host
from openenv_gym.server.verifiers_front import VerifiersFrontEnd, front_end_manifest


def serve(env: str, *, host: str = ServeConfig.host, port: int = ServeConfig.port, workers: int | None = None,
          max_sessions: int = Limits.max_sessions, token: str | None = None,
          step_timeout: float = Limits.step_timeout, idle_timeout: float = Limits.idle_timeout,
          max_frame_bytes: int = Limits.max_frame_bytes, max_action_chars: int = Limits.max_action_chars,
          frame_timeout: float = Limits.frame_timeout, resume_window: float = Limits.resume_window,
          group_timeout: float = Limits.group_timeout, threads: int = ServeConfig.threads,
          reveal_tasks: bool = ServeConfig.reveal_tasks,
          web: bool = ServeConfig.web, env_args: dict[str, Any] | None = None, log_level: str = "WARNING",
          on_ready: Callable[[str], None] | None = None, ready_fd: int | None = None,
          exit_with_stdin: bool = False, sandbox: bool = ServeConfig.sandbox, engine: str | None = None,
          sampler_socket: str | None = None, verifiers_port: int | None = None, verifiers_workers: int | None = None,
          max_concurrent: int | None = None) -> None:
    """Serve `env` (a name, a gym id, or a folder with an openenv.toml) until SIGTERM or SIGINT.

    workers: processes sharing the port (default: one per core). on_ready(url): called once serving (default:
    print the URL). ready_fd: a pipe to report to instead (protocol/ready.py). exit_with_stdin: stop when
    stdin closes (the lifeline of a server started by another process). reveal_tasks: task listings hold the
    tasks' hidden parts (answers) too; off by default, since anyone who reaches the port may list tasks. web: serve
    the playground page at /web. sandbox: episodes that run programs run them in a sandbox each (False: unconfined,
    for a machine that cannot make sandboxes; the server refuses such an environment otherwise). engine: the
    container engine whose images Harbor tasks play in ("docker", "podman"; default the one they were imported with).
    sampler_socket: the socket of a task sampler (openenv_gym.sampling.host.SamplerHost) that the server shares with
    rollout workers at the WebSocket /sampler.
    verifiers_port: serve Verifiers' env server protocol (verifiers 0.4: what prime-rl's orchestrator and Verifiers'
    EnvClient speak) on this port too, each run an episode of `env` (server/verifiers_front.py), in
    `verifiers_workers` processes at most (default: as many as `workers`), each running `max_concurrent` at most.
    """
    settings = {key: value for key, value in locals().items() if key != "on_ready"}  # the arguments, as JSON
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(processName)s %(name)s: %(message)s")
    manifest = find_manifest(env)
    if engine is not None:  # (refused here, once, rather than by every worker)
        manifest = manifest.served_with(engine)
    sandboxed = sandbox and manifest.runs_programs
    if sandboxed and os.geteuid() != 0 and userns.REFUSED not in os.environ:  # an ordinary user: root in a user
        _run_in(sys.executable, settings, on_ready, userns.command)            # namespace of the server's own
        return
    if needs_venv(manifest) and not in_venv(venv_path(manifest)):
        if ready_fd is not None and not venv_ready(manifest):
            os.write(ready_fd, status_line(building=str(venv_path(manifest))))
        _run_in(str(ensure_venv(manifest)), settings, on_ready)
        return
    if exit_with_stdin:
        _exit_when_stdin_closes()
    _open_files_to_the_hard_limit()
    if sandboxed:  # (refused here, once, rather than by every worker)
        refused = refusal(manifest.name)
        engine_instead = _containers_instead(manifest) if refused is not None else None
        if refused is not None and engine_instead is None:
            raise SandboxUnavailableError(refused)
        said = mode.describe() if engine_instead is None else \
            f"sandbox: none ({unavailable()}); each trial in a container of {engine_instead}'s, bounded by it"
        print(f"openenv-gym: {said}", file=sys.stderr, flush=True)
    config = ServeConfig(env=env, host=host, port=port, workers=workers or os.cpu_count() or 1, token=token,
                         limits=Limits(max_sessions, step_timeout, idle_timeout, max_frame_bytes, max_action_chars,
                                       frame_timeout, resume_window, group_timeout),
                         threads=threads, reveal_tasks=reveal_tasks, web=web, env_args=env_args or {},
                         sandbox=sandbox, engine=engine, sampler_socket=sampler_socket)
    from openenv_gym.server.supervisor import run_workers  # the worker machinery loads only where it runs

    front = _Front(_front_end_python(ready_fd), verifiers_port, verifiers_workers or config.workers, max_concurrent) \
        if verifiers_port is not None else None  # (its venv built before the workers start, not while they wait)
    try:
        run_workers(config, lambda bound: _report(config, bound, on_ready, ready_fd, front),
                    private_fds=() if ready_fd is None else (ready_fd,))
    finally:
        if front is not None and front.running is not None:
            front.running.stop()


def _front_end_python(ready_fd: int | None) -> str:
    """The python of the Verifiers front end's venv, built on first use (whoever waits for the server is told)."""
    manifest = front_end_manifest()
    if ready_fd is not None and not venv_ready(manifest):
        os.write(ready_fd, status_line(building=str(venv_path(manifest))))
    return str(ensure_venv(manifest))


class _Front:
    """The Verifiers front end to start once the server is up."""

    def __init__(self, python: str, port: int, workers: int, max_concurrent: int | None) -> None:
        self.python, self.port, self.workers, self.max_concurrent = python, port, workers, max_concurrent
        self.running: VerifiersFrontEnd | None = None

    def start(self, config: ServeConfig, port: int) -> str:
        """Its address, once it is bound; its runs reach this server on loopback where it listens on every address."""
        url = f"ws://{netloc(reachable_host(config.host), port)}"
        self.running = VerifiersFrontEnd.start(self.python, url, config.host, self.port, self.workers,
                                               self.max_concurrent)
        return self.running.address


def _report(config: ServeConfig, port: int, on_ready: Callable[[str], None] | None, ready_fd: int | None,
            front: _Front | None) -> None:
    url = f"ws://{netloc(config.host, port)}"
    verifiers = {"verifiers": front.start(config, port)} if front is not None else {}
    if ready_fd is not None:
        os.write(ready_fd, status_line(ready=url, workers=config.workers, pid=os.getpid(), **verifiers))
        os.close(ready_fd)
    elif on_ready is not None:
        on_ready(url)
    else:
        also = f"; Verifiers' env server protocol on {verifiers['verifiers']}" if verifiers else ""
        print(f"openenv-gym: serving {config.env} on {url} (workers={config.workers}, "
              f"max_sessions={config.limits.max_sessions}){also}", flush=True)


def _containers_instead(manifest: Any) -> str | None:
    """The engine whose containers a Harbor import's trials run in where no sandbox can be made (None: the
    manifest is no such import); SandboxUnavailableError where that engine does not answer either."""
    if manifest.kind != "harbor" or manifest.engine is None:
        return None
    from openenv_gym.adapters.harbor.placement import containers_instead  # (loads the Harbor adapter only here)

    engine = containers_instead(manifest)
    return engine.name if engine is not None else None


def _run_in(python: str, settings: dict[str, Any], on_ready: Callable[[str], None] | None,
            wrap: Callable[[list[str]], list[str]] = list) -> None:
    """Run the same serve() with another python (an environment's venv), through its CLI, and wait for it; `wrap`
    makes the command another that runs it (in a user namespace)."""
    relay = None
    if settings["ready_fd"] is None and on_ready is not None:  # hear the child's ready line ourselves
        relay, settings["ready_fd"] = os.pipe()
    ready_fd = settings["ready_fd"]
    command = wrap([python, "-m", "openenv_gym", "serve", settings["env"], "--settings", json.dumps(settings)])
    child = subprocess.Popen(command, pass_fds=() if ready_fd is None else (ready_fd,))
    if ready_fd is not None:
        os.close(ready_fd)  # the child holds it now: its end tells the reader whether the server lives
    if relay is not None:
        threading.Thread(target=_relay_ready, args=(relay, on_ready), name="ready-relay", daemon=True).start()

    def forward(signum: int, _frame: object) -> None:
        child.send_signal(signum)

    if threading.current_thread() is threading.main_thread():  # only the main thread may handle signals
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, forward)
    code = child.wait()
    if code > 0:
        raise ServerStartError(f"the server of {settings['env']} exited with code {code}; its error is above")


def _relay_ready(fd: int, on_ready: Callable[[str], None]) -> None:
    with os.fdopen(fd, "rb") as pipe:
        for line in pipe:
            status = read_status(line)
            if "ready" in status:
                on_ready(status["ready"])


def _open_files_to_the_hard_limit() -> None:
    """Each session holds files (its connection's socket; a sandbox's pipes, sockets and namespaces): the soft limit
    on open files raised to the hard one, as servers do (an ordinary user's soft limit is often 1,024)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def _exit_when_stdin_closes() -> None:
    """Stop when our parent (who holds our stdin) goes away: the lifeline of a server another process started."""

    def watch() -> None:
        # os.read, not sys.stdin: a thread blocked in sys.stdin holds its lock, and forked workers
        # close sys.stdin at start-up (multiprocessing), which would wait on that lock forever.
        fd = sys.stdin.fileno()
        while os.read(fd, 4096):
            pass
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="stdin-watch", daemon=True).start()

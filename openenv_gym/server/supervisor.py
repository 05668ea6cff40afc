"""Worker processes: one per core on a shared port, restarted if one dies.

Each worker binds the port with SO_REUSEPORT, so the kernel spreads connections over workers.
With one worker everything runs in this process (the quickest start, used by the embedded default).
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import signal
import socket
import threading
from collections.abc import Callable
from multiprocessing.connection import wait

from openenv_gym.errors import ServerStartError
from openenv_gym.runtime.lifetime import die_with_parent
from openenv_gym.runtime.loops import run
from openenv_gym.server.config import ServeConfig, reachable_host
from openenv_gym.server.metrics import ServerMetrics, shared_rows
from openenv_gym.server.sessions import SessionCounter
from openenv_gym.server.worker import Worker, listen_socket

log = logging.getLogger(__name__)


def _worker_main(config: ServeConfig, port: int, index: int, slots, rows, lock, ready,
                 private_fds: tuple[int, ...]) -> None:
    # SIGTERM when the supervisor dies (killed outright, say), so the worker stops at once and its clients learn it
    # from a close frame, rather than at the next check of its parent (worker.py's housekeeping)
    die_with_parent(signal.SIGTERM)
    for fd in private_fds:  # forked with the supervisor's: a pipe held here would never tell its reader we ended
        os.close(fd)
    counter = SessionCounter(config.limits.max_sessions, slots, index, lock)
    worker = Worker(config, counter, ServerMetrics(rows, index))
    sock = listen_socket(config.host, port)
    run(worker.run(sock, ready.release))


def run_workers(config: ServeConfig, on_ready: Callable[[int], None], private_fds: tuple[int, ...] = ()) -> None:
    """Serve until SIGTERM or SIGINT; `on_ready(port)` once every worker listens. `private_fds` stay with this
    process: worker processes close them."""
    reserved = _first_listener(config.host, config.port)
    port = reserved.getsockname()[1]
    if config.workers == 1:
        worker = Worker(config, SessionCounter(config.limits.max_sessions))
        run(worker.run(reserved, lambda: on_ready(port)))
        return
    _supervise(config, port, on_ready, private_fds)
    reserved.close()


def _first_listener(host: str, port: int) -> socket.socket:
    """The server's first socket on (host, port). Workers bind with SO_REUSEPORT, which would also let a second
    server of the same user onto a port in use, each then answering half the connections: a port something answers
    on is refused first."""
    if port:
        with contextlib.suppress(OSError), socket.create_connection((reachable_host(host), port), timeout=1.0):
            raise ServerStartError(f"port {port} on {host} is in use (another server?); choose another with --port, "
                                   "or --port 0 for a free one")
    try:
        return listen_socket(host, port)
    except OSError as exc:
        raise ServerStartError(f"cannot listen on {host}:{port}: {exc.strerror}; choose another --host or --port "
                               "(--port 0: a free one)") from None


def _supervise(config: ServeConfig, port: int, on_ready: Callable[[int], None], private_fds: tuple[int, ...]) -> None:
    # fork: workers start in milliseconds and share no named semaphores with a resource tracker
    context = multiprocessing.get_context("fork")
    slots = context.Array("q", config.workers, lock=False)
    rows = shared_rows(context, config.workers)  # each worker's counts, for GET /metrics on any of them
    lock = context.Lock()
    ready = context.Semaphore(0)
    stopping = threading.Event()

    def start(index: int) -> multiprocessing.Process:
        # not daemonic: they are stopped here (a worker's programs and their fork server end with it), and die with
        # this process (die_with_parent)
        process = context.Process(target=_worker_main, name=f"openenv-worker-{index}",
                                  args=(config, port, index, slots, rows, lock, ready, private_fds), daemon=False)
        process.start()
        return process

    def stop(*_: object) -> None:
        stopping.set()
        for process in processes.values():
            if process.is_alive():
                process.terminate()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    processes = {index: start(index) for index in range(config.workers)}
    for _ in range(config.workers):
        while not ready.acquire(timeout=0.5):
            if any(not p.is_alive() for p in processes.values()):
                stop()
                raise SystemExit("openenv-gym: a worker failed to start; see the error above")
    on_ready(port)
    while not stopping.is_set():
        by_sentinel = {p.sentinel: index for index, p in processes.items()}
        for sentinel in wait(list(by_sentinel), timeout=1.0):
            index = by_sentinel[sentinel]
            if stopping.is_set():
                break
            log.error("worker %d exited with code %s; restarting it", index, processes[index].exitcode)
            with lock:
                slots[index] = 0  # its sessions died with it
            processes[index] = start(index)
    for process in processes.values():
        process.join(timeout=10)
        if process.is_alive():  # it did not stop in time: it must not hold this process's exit
            process.kill()
            process.join()

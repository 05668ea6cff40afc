"""One worker process: an event loop, a WebSocket server on a shared port, its own sessions."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from openenv_gym.adapters import load_factory
from openenv_gym.errors import EnvError
from openenv_gym.manifest import find_manifest
from openenv_gym.outbox import Outbox
from openenv_gym.protocol import error_response
from openenv_gym.server.blocking import OffLoop, is_blocking
from openenv_gym.server.dispatch import Dispatcher, Limits, Peer
from openenv_gym.server.http import make_process_request
from openenv_gym.server.sessions import SessionCounter

log = logging.getLogger(__name__)

# Above the protocol's own frame limit (answered with `too_large` on a live connection), the
# WebSocket layer closes the connection instead of buffering without bound.
HARD_FRAME_FACTOR = 4
LISTEN_BACKLOG = 4096  # thousands of clients may connect at once


@dataclass(frozen=True)
class ServeConfig:
    env: str  # an environment name or the path of a folder holding an openenv.toml
    host: str = "127.0.0.1"
    port: int = 8000
    workers: int = 1
    token: str | None = None
    limits: Limits = field(default_factory=Limits)
    threads: int = 32  # worker threads per process for environments with blocking methods
    ping_interval: float | None = None  # server pings; off: clients may not read while the model thinks
    env_args: dict[str, Any] = field(default_factory=dict)  # verifiers: arguments of load_environment()


def listen_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound with SO_REUSEPORT, so each worker can listen on the same port."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    return sock


def _keep_alive(connection: ServerConnection) -> None:
    """TCP keepalive finds dead peers without needing the client's event loop to answer pings."""
    sock = connection.transport.get_extra_info("socket")
    if sock is None or not hasattr(socket, "TCP_KEEPIDLE"):
        return
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, 60)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, 10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, 6)


def _unencodable(message: dict, exc: Exception) -> dict:
    return error_response(message.get("id"), EnvError(
        f"the environment returned a value JSON cannot carry ({exc}); keep obs and info to JSON types"))


class Worker:
    def __init__(self, config: ServeConfig, counter: SessionCounter) -> None:
        self.config = config
        self.counter = counter
        manifest = find_manifest(config.env)
        factory = load_factory(manifest, self.config.env_args)
        self.description = factory.describe()
        self.executor = ThreadPoolExecutor(config.threads, thread_name_prefix="openenv-env")
        if isinstance(factory, type) and is_blocking(factory):
            self.factory = lambda: OffLoop(factory(), self.executor)
        else:
            self.factory = factory
        self.workers = config.workers
        self.dispatcher: Dispatcher | None = None

    def health(self) -> dict:
        return {"status": "ok", "env": self.description["name"], "sessions": self.counter.total(),
                "sessions_per_worker": self.counter.per_worker(),
                "max_sessions": self.config.limits.max_sessions, "workers": self.workers}

    async def handle(self, connection: ServerConnection) -> None:
        assert self.dispatcher is not None
        _keep_alive(connection)

        async def send(frame: bytes) -> None:
            await connection.send(frame, text=True)

        outbox = Outbox(send, _unencodable)
        peer = Peer(outbox.put)
        try:
            async for data in connection:
                self.dispatcher.handle_frame(peer, data)
        except ConnectionClosed:
            pass
        finally:
            outbox.closed = True
            self.dispatcher.drop_peer(peer)

    async def _housekeeping(self, stop: asyncio.Event) -> None:
        """Reap idle sessions; stop if the supervisor process went away."""
        parent = os.getppid()
        period = max(0.2, min(self.config.limits.idle_timeout / 4, 5.0))
        loop = asyncio.get_running_loop()
        while not stop.is_set():
            await asyncio.sleep(period)
            assert self.dispatcher is not None
            reaped = self.dispatcher.reap_idle(loop.time())
            if reaped:
                log.info("reaped %d idle sessions", reaped)
            if self.config.workers > 1 and os.getppid() != parent:
                stop.set()

    async def run(self, sock: socket.socket, ready: Callable[[], None]) -> None:
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        self.dispatcher = Dispatcher(self.factory, self.description, self.config.limits, self.counter)
        limits = self.config.limits
        process_request = make_process_request(self.config.token, self.health, lambda: self.dispatcher.info,
                                               self.dispatcher.catalog)
        async with serve(
            self.handle, sock=sock, compression=None, process_request=process_request,
            max_size=limits.max_frame_bytes * HARD_FRAME_FACTOR, max_queue=64,
            ping_interval=self.config.ping_interval, server_header=None, backlog=LISTEN_BACKLOG,
        ):
            ready()
            housekeeping = loop.create_task(self._housekeeping(stop))
            await stop.wait()
            housekeeping.cancel()
        for session in list(self.dispatcher.sessions.values()):
            self.dispatcher.end_session(session)
        self.executor.shutdown(wait=False, cancel_futures=True)


def run_event_loop(main) -> None:
    """Run a coroutine on uvloop when it is installed."""
    try:
        import uvloop
    except ImportError:
        asyncio.run(main)
    else:
        uvloop.run(main)

"""One worker process: an event loop, a WebSocket server on a shared port, the session core and its front ends."""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import signal
import socket
from collections.abc import Callable

from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.frames import CloseCode

from openenv_gym.adapters import load_factory
from openenv_gym.errors import EnvError
from openenv_gym.manifests import find_manifest
from openenv_gym.manifests.schema import ImportedManifest
from openenv_gym.protocol.native import error_response
from openenv_gym.protocol.outbox import Outbox
from openenv_gym.runtime.memory import release_free_memory
from openenv_gym.sandbox import live_sandboxes
from openenv_gym.sandbox import pool as sandbox_pool
from openenv_gym.server.catalog import Catalog
from openenv_gym.server.config import ServeConfig
from openenv_gym.server.core import SessionCore
from openenv_gym.server.frames import FrameDeadline
from openenv_gym.server.http import WEBSOCKET_PATHS, make_process_request, select_subprotocol
from openenv_gym.server.http_post import PostAwareConnection
from openenv_gym.server.metrics import CONTENT_TYPE, ServerMetrics
from openenv_gym.server.model_endpoint import ModelEndpointServer
from openenv_gym.server.native import NativeFrontEnd
from openenv_gym.server.openenv_ws import OPENENV_PATH, OpenEnvFrontEnd
from openenv_gym.server.sampler_relay import SAMPLER_PATH, SamplerRelay
from openenv_gym.server.sender import FrameSender
from openenv_gym.server.sessions import SessionCounter
from openenv_gym.web import playground_pages

log = logging.getLogger(__name__)

# Above the protocol's own frame limit (answered with `too_large` on a live connection), the
# WebSocket layer closes the connection instead of buffering without bound.
HARD_FRAME_FACTOR = 2
INCOMING_QUEUE = 16  # frames read ahead of the handler; past it the socket is not read (TCP pushes back)
LISTEN_BACKLOG = 4096  # thousands of clients may connect at once
# Stopping, a worker tells each connection it goes away and waits this long for the peer's close frame; a
# synchronous client reads its socket only during its calls and never answers, so its connection is then cut
# rather than held for websockets' 10 s (which outlasts what a LocalServer waits for its process to end).
SHUTDOWN_CLOSE_WAIT = 1.0


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


async def _going_away(connections: set[ServerConnection]) -> None:
    """Close every connection (1001, going away); cut those whose peer does not answer within SHUTDOWN_CLOSE_WAIT."""
    closing = [asyncio.ensure_future(connection.close(CloseCode.GOING_AWAY)) for connection in connections]
    if not closing:
        return
    await asyncio.wait(closing, timeout=SHUTDOWN_CLOSE_WAIT)
    for connection in connections:
        connection.transport.abort()  # a no-op for one already closed


class Worker:
    def __init__(self, config: ServeConfig, counter: SessionCounter, metrics: ServerMetrics | None = None) -> None:
        self.config = config
        self.counter = counter
        self.metrics = metrics or ServerMetrics()
        self.metrics.sessions, self.metrics.sandboxes = counter.total, live_sandboxes
        self.manifest = find_manifest(config.env)
        if config.engine is not None:
            self.manifest = self.manifest.served_with(config.engine)
        if isinstance(self.manifest, ImportedManifest):  # relative paths resolve as they did in its checkout
            os.chdir(self.manifest.vendored)
        self.sampler: SamplerRelay | None = None  # the relay to the task sampler it shares (--sampler)
        self.model_endpoint = ModelEndpointServer(self.metrics)  # started by the first program that needs it
        self.factory = load_factory(self.manifest, config.env_args, self.model_endpoint, config.sandbox)
        # What loading left (the env's libraries and data: datasets, verifiers, pydantic models) lives as long as
        # the worker: frozen, the garbage collector stops walking it at every full collection, which under many
        # sessions cost a Verifiers worker nearly half its time
        gc.freeze()

    def health(self) -> dict:
        return {"status": "ok", "env": self.core.description["name"], "sessions": self.counter.total(),
                "sessions_per_worker": self.counter.per_worker(),
                "max_sessions": self.config.limits.max_sessions, "workers": self.config.workers}

    async def handle(self, connection: ServerConnection) -> None:
        """One WebSocket connection: OpenEnv's protocol on /ws, the native one elsewhere."""
        _keep_alive(connection)
        path = connection.request.path.partition("?")[0] if connection.request is not None else "/"
        if path == SAMPLER_PATH and self.sampler is not None:
            await self.sampler.serve(connection)
            return
        if path == OPENENV_PATH:
            try:
                await self.openenv.serve(connection, self.frame_deadline.watch(connection))
            finally:
                self.frame_deadline.forget(connection)
            return
        sender = FrameSender(connection, self.config.limits.max_frame_bytes, self.core.eager)
        outbox = Outbox(sender.send, asyncio.get_running_loop().call_soon, _unencodable)
        send = self._counting_errors(outbox.put)
        peer = self.native.connect(send, connection.transport.abort, outbox)
        watch = self.frame_deadline.watch(connection)
        try:
            async for data in connection:
                watch.frames += 1
                peer = self.native.handle_frame(peer, data)
                outbox.flush()  # what was answered inline leaves now, a loop turn sooner
                if not sender.drained.is_set():  # the peer does not read its answers: read nothing more from it
                    watch.paused = True
                    await sender.drained.wait()
                    watch.paused = False
        except ConnectionClosed:
            pass
        finally:
            outbox.closed = True
            sender.close()
            self.frame_deadline.forget(connection)
            # a client that closed with a close frame meant it: its sessions end now; a socket that just
            # dropped keeps them for the resume window
            self.native.disconnect(peer, send, resumable=connection.protocol.close_rcvd is None)

    def _counting_errors(self, put: Callable[[dict], None]) -> Callable[[dict], None]:
        """A connection's `send`: each answer goes to `put`, its errors counted (GET /metrics)."""
        metrics = self.metrics

        def send(answer: dict) -> None:
            if "error" in answer:
                metrics.errors_in(answer)
            put(answer)

        return send

    async def _cut_incomplete_frames(self) -> None:
        timeout = self.config.limits.frame_timeout
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(min(1.0, timeout / 4))
            self.frame_deadline.check(loop.time())

    async def _housekeeping(self, stop: asyncio.Event) -> None:
        """Reap idle sessions; stop if the supervisor process went away."""
        parent = os.getppid()
        limits = self.config.limits
        period = max(0.2, min(limits.idle_timeout / 4, limits.resume_window / 4 or 5.0, limits.group_timeout / 4, 5.0))
        loop = asyncio.get_running_loop()
        while not stop.is_set():
            await asyncio.sleep(period)
            reaped = self.core.reap_idle(loop.time()) + self.openenv.expire_idle(loop.time())
            if reaped:
                log.info("reaped %d idle sessions", reaped)
            expired = self.native.expire_dropped(loop.time())
            if expired:
                log.info("ended the sessions of %d dropped connections not resumed in time", expired)
            self.core.groups.expire(loop.time())  # logs what it drops
            release_free_memory()  # what a burst (large frames, many ended sessions) freed goes back to the OS
            self.metrics.publish()  # (to the worker that answers the next scrape)
            if self.config.workers > 1 and os.getppid() != parent:
                stop.set()

    async def run(self, sock: socket.socket, ready: Callable[[], None]) -> None:
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        limits = self.config.limits
        self.core = SessionCore(self.factory, limits, self.counter, self.config.threads, self.metrics)
        self.core.description["manifest"] = self.manifest.name  # clients check they reach the env they named
        catalog = Catalog(self.factory, self.core.description.get("name", ""), self.config.reveal_tasks)
        self.native = NativeFrontEnd(self.core, catalog)
        self.openenv = OpenEnvFrontEnd(self.core, self.config.token)
        sockets = WEBSOCKET_PATHS
        if self.config.sampler_socket is not None:  # the task sampler it shares with rollout workers
            self.sampler = SamplerRelay(self.config.sampler_socket)
            await self.sampler.start(catalog)
            sockets += (SAMPLER_PATH,)
        self.frame_deadline = FrameDeadline(limits.frame_timeout)
        pages = {"/metrics": (self.metrics.text, CONTENT_TYPE)}
        open_routes = {"/healthz": self.health, "/health": self.openenv.health}
        routes = {"/info": self.native.current_info, "/schema": self.openenv.schema, "/metadata": self.openenv.metadata}
        process_request = make_process_request(self.config.token, open_routes, routes, catalog,
                                               pages | (playground_pages() if self.config.web else {}), sockets)
        async with serve(
            self.handle, sock=sock, compression=None, process_request=process_request,
            max_size=limits.max_frame_bytes * HARD_FRAME_FACTOR, max_queue=INCOMING_QUEUE,
            ping_interval=self.config.ping_interval, server_header=None, backlog=LISTEN_BACKLOG,
            create_connection=PostAwareConnection.with_routes({"/mcp": self.openenv.post_mcp}),
            select_subprotocol=select_subprotocol,
        ) as server:
            ready()
            chores = [loop.create_task(self._housekeeping(stop)), loop.create_task(self._cut_incomplete_frames())]
            await stop.wait()
            for chore in chores:
                chore.cancel()
            await _going_away(server.connections)
        self.native.shutdown()
        self.openenv.shutdown()
        self.core.shutdown()
        self.model_endpoint.close()
        closing = getattr(self.factory, "aclose", None)  # what a factory holds open for the worker's sessions
        if closing is not None:
            await closing()  # (with the threads still there: Verifiers' serving resources end in one)
        await sandbox_pool.drain()  # the sandboxes kept for the next episodes
        self.core.stop_threads()

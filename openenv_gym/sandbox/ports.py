"""Ports between a sandbox's network and the host's, opened one at a time by the server for what the episode must
reach (a service of the server's) or be reached at (a service it runs), each connection piped both ways by the
server's event loop, and the hosts a sandbox is allowed to reach (SandboxPolicy.allow). A sandbox with the "model"
network reaches nothing else."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Callable
from functools import partial

from openenv_gym.sandbox.netns import connected, in_namespace, listening_socket

CHUNK = 64 * 1024


def into_sandbox(pid: int, port: int, to: str = "127.0.0.1", at: str = "127.0.0.1") -> asyncio.Task:
    """`at`:`port` inside the sandbox of process `pid` forwards to `to`:`port` as the server reaches it (a service
    the server runs on its loopback, or a host the sandbox is allowed). The listening socket is made before this
    returns; the task serves it."""
    listener = listening_socket(pid, port, at)
    return asyncio.ensure_future(asyncio.start_server(partial(_forward, partial(connected, port, to)), sock=listener))


def close_port(port: asyncio.Task | asyncio.Server) -> None:
    """A port's server closed (or the task that starts one, cancelled or its server closed)."""
    if not isinstance(port, asyncio.Task):
        port.close()  # (a server: asyncio's or uvloop's)
    elif not port.done():
        port.cancel()
    elif not port.cancelled() and port.exception() is None:
        port.result().close()


async def out_of_sandbox(pid: int, port: int) -> asyncio.Server:
    """A new port of the host's loopback that forwards into the sandbox's 127.0.0.1:`port` (a service it runs)."""
    return await asyncio.start_server(partial(_forward, partial(in_namespace, pid, "net", partial(connected, port))),
                                      "127.0.0.1", 0)


async def _forward(connect: Callable[[], socket.socket], reader: asyncio.StreamReader,
                   writer: asyncio.StreamWriter) -> None:
    try:
        other_reader, other_writer = await asyncio.open_connection(sock=await asyncio.to_thread(connect))
    except OSError:
        writer.close()
        return
    await asyncio.gather(_pipe(reader, other_writer), _pipe(other_reader, writer))


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(ConnectionError, OSError):
            writer.close()

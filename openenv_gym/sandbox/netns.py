"""Sockets in a sandbox's network namespace, made by the server: a thread of its own joins the namespace (a network
or IPC namespace is a thread's), makes the socket and ends, so no other thread of the server ever leaves the host's
network. A socket keeps the namespace it was made in, wherever its file descriptor is used: the server's event loop
serves a listening one, or reads and writes a connected one, as any other."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable
from functools import partial
from typing import TypeVar

from openenv_gym.sandbox.enter import setns

T = TypeVar("T")
MODEL_PORT = 80  # inside every sandbox (each has a network of its own): below 1024, so its programs cannot take it


def in_namespace(pid: int, kind: str, make: Callable[[], T]) -> T:
    """`make()`, run in a thread that joined the `kind` namespace ("net" or "ipc") of process `pid`."""
    made: list[T | BaseException] = []

    def run() -> None:
        try:
            fd = os.open(f"/proc/{pid}/ns/{kind}", os.O_RDONLY)
            try:
                setns(fd, kind)
            finally:
                os.close(fd)
            made.append(make())
        except BaseException as exc:
            made.append(exc)

    thread = threading.Thread(target=run, name=f"sandbox-{kind}ns")
    thread.start()
    thread.join()
    if isinstance(made[0], BaseException):
        raise made[0]
    return made[0]  # type: ignore[return-value]


def _listening(port: int, host: str) -> socket.socket:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((host, port))
    listener.listen(64)
    listener.setblocking(False)
    return listener


def connected(port: int, host: str = "127.0.0.1") -> socket.socket:
    """A non-blocking connection to `host`:`port` (from the network namespace this runs in)."""
    connection = socket.create_connection((host, port), timeout=10)
    connection.setblocking(False)
    return connection


def listening_socket(pid: int, port: int = MODEL_PORT, host: str = "127.0.0.1") -> socket.socket:
    """A socket listening on `host`:`port` (a loopback address) in the network namespace of process `pid`."""
    return in_namespace(pid, "net", partial(_listening, port, host))

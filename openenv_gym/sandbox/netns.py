"""A listening socket inside a sandbox's network namespace, made by the server: the one address a sandbox with the
"model" network reaches, its session's model endpoint, served by the server's own event loop on that socket. A
thread of its own joins the namespace (a network namespace is a thread's), makes the socket and ends; no other
thread of the server ever leaves the host's network."""

from __future__ import annotations

import os
import socket
import threading

from openenv_gym.sandbox.enter import setns

MODEL_PORT = 80  # inside every sandbox (each has a network of its own): below 1024, so its programs cannot take it


def listening_socket(pid: int, port: int = MODEL_PORT) -> socket.socket:
    """A socket listening on 127.0.0.1:`port` in the network namespace of process `pid`."""
    made: list[socket.socket | BaseException] = []

    def make() -> None:
        try:
            fd = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY)
            try:
                setns(fd, "net")
            finally:
                os.close(fd)
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(("127.0.0.1", port))
            listener.listen(64)
            listener.setblocking(False)
            made.append(listener)
        except BaseException as exc:
            made.append(exc)

    thread = threading.Thread(target=make, name="sandbox-netns")
    thread.start()
    thread.join()
    if isinstance(made[0], BaseException):
        raise made[0]
    return made[0]

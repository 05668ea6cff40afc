"""A deadline for incomplete frames: a peer may not hold part of a frame (or of a fragmented message) open
for longer than `timeout` seconds.

Without it, a client that sends the start of a large frame and then trickles, or stops, holds the bytes
received so far, and its connection, for as long as it likes. The watch looks at the bytes the WebSocket
layer holds unparsed and at a fragmented message in progress; a connection that completes no frame while
one stays incomplete past the deadline is cut. A connection whose reading the server paused itself (its
peer does not read its answers, see sender.py) is not held to it.
"""

from __future__ import annotations

import logging

from websockets.asyncio.server import ServerConnection

log = logging.getLogger(__name__)


class FrameWatch:
    """What the deadline needs to know of one connection."""

    __slots__ = ("frames", "frames_then", "paused", "since")

    def __init__(self) -> None:
        self.frames = 0  # frames read so far
        self.frames_then = 0  # ... when an incomplete frame was first seen
        self.since: float | None = None  # when an incomplete frame was first seen
        self.paused = False  # the server stopped reading this connection itself


def _incomplete(connection: ServerConnection) -> bool:
    protocol = connection.protocol
    reader = getattr(protocol, "reader", None)
    # websockets' unparsed bytes, and the size so far of a fragmented message being received (None: none is)
    return bool(getattr(reader, "buffer", b"")) or getattr(protocol, "current_size", None) is not None


class FrameDeadline:
    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.watches: dict[ServerConnection, FrameWatch] = {}

    def watch(self, connection: ServerConnection) -> FrameWatch:
        watch = self.watches[connection] = FrameWatch()
        return watch

    def forget(self, connection: ServerConnection) -> None:
        self.watches.pop(connection, None)

    def check(self, now: float) -> int:
        """Cut the connections past the deadline; return how many."""
        cut = 0
        for connection, watch in list(self.watches.items()):
            if watch.paused or not _incomplete(connection):
                watch.since = None
            elif watch.since is None or watch.frames != watch.frames_then:
                watch.since, watch.frames_then = now, watch.frames
            elif now - watch.since > self.timeout:
                log.info("cutting a connection that kept a frame incomplete for over %g s", self.timeout)
                connection.transport.abort()
                self.forget(connection)
                cut += 1
        return cut

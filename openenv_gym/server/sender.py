"""One connection's outgoing frames, bounded: written at once while the peer reads, queued while it does not.

A frame is written to the socket as soon as it is made, as long as the socket takes it. Once the peer stops
reading, the next frames wait in a queue, written one after another by one task as the socket drains (never
a task per frame). When the queue holds more than `limit` bytes, `drained` is cleared: the connection's
handler then reads no more requests from that peer until it has read its answers, so a client that sends
and never reads holds at most `limit` bytes of answers (plus those of the requests already running), and
TCP pushes back on its sends.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque

from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

from openenv_gym.runtime.eager import EagerStarter

log = logging.getLogger(__name__)


class FrameSender:
    __slots__ = ("closed", "connection", "drained", "eager", "limit", "queue", "queued_bytes", "writer")

    def __init__(self, connection: ServerConnection, limit: int, eager: EagerStarter) -> None:
        self.connection = connection
        self.limit = limit
        self.eager = eager
        self.queue: deque[bytes] = deque()
        self.queued_bytes = 0
        self.writer: asyncio.Task | None = None  # writes the queue while the socket is slow
        self.drained = asyncio.Event()  # set while the queue is under the limit
        self.drained.set()
        self.closed = False

    def send(self, frame: bytes) -> None:
        if self.closed:
            return
        if self.writer is not None:  # the peer is behind: wait in line
            self.queue.append(frame)
            self.queued_bytes += len(frame)
            if self.queued_bytes > self.limit:
                self.drained.clear()
            return
        try:
            done, task = self.eager.start(self.connection.send(frame, text=True))  # written at once unless paused
        except ConnectionClosed:
            self.close()
            return
        if not done:
            self.writer = asyncio.get_running_loop().create_task(self._write_queue(task))

    async def _write_queue(self, sending: asyncio.Task) -> None:
        try:
            await sending
            while self.queue and not self.closed:
                frame = self.queue.popleft()
                self.queued_bytes -= len(frame)
                if self.queued_bytes <= self.limit // 2:
                    self.drained.set()
                await self.connection.send(frame, text=True)
        except ConnectionClosed:
            self.close()
        except Exception:
            log.exception("sending a frame failed")
            self.close()
        finally:
            self.writer = None
            self.drained.set()

    def close(self) -> None:
        """Send nothing more; drop what waits (the peer is gone)."""
        self.closed = True
        self.queue.clear()
        self.queued_bytes = 0
        self.drained.set()

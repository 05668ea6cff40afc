"""Coalesce outgoing messages: everything queued in one event-loop iteration leaves as one frame.

Client and server both send through an Outbox, so 1,000 `step` calls gathered in one iteration
(or a batch frame the server answers inline) cost one WebSocket frame, not 1,000.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from websockets.exceptions import ConnectionClosed

from openenv_gym.protocol import encode_frame

log = logging.getLogger(__name__)

SendFrame = Callable[[bytes], Awaitable[None]]
OnUnencodable = Callable[[dict, Exception], "dict | None"]


def _log_send_failure(task: asyncio.Task) -> None:
    if task.cancelled():
        return
    exc = task.exception()
    if exc is not None and not isinstance(exc, ConnectionClosed):
        log.error("sending a frame failed", exc_info=exc)


class Outbox:
    __slots__ = ("_loop", "_max_frame_bytes", "_on_unencodable", "_pending", "_scheduled", "_send", "closed")

    def __init__(self, send_frame: SendFrame, on_unencodable: OnUnencodable,
                 max_frame_bytes: int | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        self._max_frame_bytes = max_frame_bytes
        self._send = send_frame
        self._on_unencodable = on_unencodable
        self._pending: list[dict] = []
        self._scheduled = False
        self.closed = False

    def put(self, message: dict) -> None:
        if self.closed:
            return
        self._pending.append(message)
        if not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self._flush)

    def put_many(self, messages: list[dict]) -> None:
        if self.closed or not messages:
            return
        self._pending.extend(messages)
        if not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self._flush)

    def _encode(self, messages: list[dict]) -> bytes | None:
        try:
            return encode_frame(messages)
        except TypeError:
            pass
        # Some message holds a value JSON cannot carry: replace that one, keep the rest.
        kept = []
        for message in messages:
            try:
                encode_frame([message])
            except TypeError as exc:
                message = self._on_unencodable(message, exc)
                if message is None:
                    continue
            kept.append(message)
        return encode_frame(kept) if kept else None

    def _frames(self, messages: list[dict]) -> list[bytes]:
        """Encode messages, halving the batch until each frame fits under the frame limit."""
        data = self._encode(messages)
        if data is None:
            return []
        if self._max_frame_bytes is None or len(data) <= self._max_frame_bytes or len(messages) == 1:
            return [data]
        middle = len(messages) // 2
        return self._frames(messages[:middle]) + self._frames(messages[middle:])

    def _flush(self) -> None:
        self._scheduled = False
        messages, self._pending = self._pending, []
        if self.closed or not messages:
            return
        for data in self._frames(messages):
            self._loop.create_task(self._send(data)).add_done_callback(_log_send_failure)

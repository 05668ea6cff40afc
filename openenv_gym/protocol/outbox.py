"""Coalesce outgoing messages: everything queued in one event-loop iteration leaves as one frame.

Client and server both send through an Outbox, so 1,000 `step` calls gathered in one iteration (or a
batch frame the server answers inline) cost one WebSocket frame, not 1,000. The Outbox does no I/O of
its own: it is given how to schedule its flush (the loop's `call_soon`) and how to send a frame.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from openenv_gym.protocol.native import encode_frame

SendFrame = Callable[[bytes], None]
Schedule = Callable[[Callable[[], None]], Any]
OnUnencodable = Callable[[dict, Exception], "dict | None"]


class Outbox:
    __slots__ = ("_max_frame_bytes", "_on_unencodable", "_pending", "_schedule", "_scheduled", "_send", "closed",
                 "pack")

    def __init__(self, send_frame: SendFrame, schedule: Schedule, on_unencodable: OnUnencodable,
                 max_frame_bytes: int | None = None) -> None:
        self._send = send_frame
        self._schedule = schedule
        self._on_unencodable = on_unencodable
        self._max_frame_bytes = max_frame_bytes
        self._pending: list[dict] = []
        self._scheduled = False
        self.closed = False
        # what the messages of a frame become as they leave (answers.packed, for a peer that asked for columns)
        self.pack: Callable[[list[dict]], list[dict]] | None = None

    def put(self, message: dict) -> None:
        if self.closed:
            return
        self._pending.append(message)
        if not self._scheduled:
            self._scheduled = True
            self._schedule(self._flush)

    def put_many(self, messages: list[dict]) -> None:
        if self.closed or not messages:
            return
        self._pending.extend(messages)
        if not self._scheduled:
            self._scheduled = True
            self._schedule(self._flush)

    def _encode(self, messages: list[dict]) -> bytes | None:
        pack = self.pack
        try:
            return encode_frame(pack(messages) if pack is not None else messages)
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
        if not kept:
            return None
        return encode_frame(pack(kept) if pack is not None else kept)

    def _frames(self, messages: list[dict]) -> list[bytes]:
        """Encode messages, halving the batch until each frame fits under the frame limit."""
        data = self._encode(messages)
        if data is None:
            return []
        if self._max_frame_bytes is None or len(data) <= self._max_frame_bytes or len(messages) == 1:
            return [data]
        middle = len(messages) // 2
        return self._frames(messages[:middle]) + self._frames(messages[middle:])

    def flush(self) -> None:
        """Send what is queued now (the flush already scheduled then finds nothing to send)."""
        if self._pending:
            self._send_pending()

    def _flush(self) -> None:
        self._scheduled = False
        self._send_pending()

    def _send_pending(self) -> None:
        messages, self._pending = self._pending, []
        if self.closed or not messages:
            return
        for data in self._frames(messages):
            self._send(data)

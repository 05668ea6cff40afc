"""Blocks of requests with consecutive ids whose answers go to one sink: the vector client's way through a
connection, with no future or dict entry per request."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class BatchSink(Protocol):
    """Receives the answers to a block of requests sent with `Connection.submit_batch`."""

    def answer(self, offsets: list[int], answers: list[dict] | list[Exception]) -> None:
        """Answers (or errors) for the requests at these offsets of the block."""

    def answer_columns(self, offsets: list[int], message: dict, positions: Sequence[int]) -> None:
        """Answers for the requests at these offsets of the block: entries `positions` of a message of columns
        (protocol/answers.py)."""


class Batch:
    """Requests with ids start..stop-1, answered into one sink (no future or dict entry per request)."""

    __slots__ = ("answered", "messages", "remaining", "sink", "start", "stop")

    def __init__(self, start: int, messages: list[dict], sink: BatchSink) -> None:
        self.start, self.stop, self.sink, self.messages = start, start + len(messages), sink, messages
        self.answered = bytearray(len(messages))
        self.remaining = len(messages)

    def unanswered(self) -> list[dict]:
        return [message for message, done in zip(self.messages, self.answered, strict=True) if not done]

    def fail_unanswered(self, error: Exception) -> None:
        offsets = [offset for offset, done in enumerate(self.answered) if not done]
        if offsets:
            self.sink.answer(offsets, [error] * len(offsets))

"""Where each answer of a connection goes: the future of a single request, or the sink of its batch (answers in
columns too, protocol/answers.py), one call per batch and message."""

from __future__ import annotations

import asyncio
import logging
from bisect import bisect_left, bisect_right

from openenv_gym.client.native.batches import Batch
from openenv_gym.protocol import answers as answers_protocol

log = logging.getLogger(__name__)


class Routing:
    """The routing half of Connection (which sets these attributes)."""

    _pending: dict[int, asyncio.Future]  # single requests, in the order sent (and of their ids)
    _messages: dict[int, dict] | None  # resumable: the requests of _pending, to send again
    _batches: dict[int, Batch]  # by first id
    _starts: list[int]  # their first ids, ascending: a batch is found by bisection

    def _route(self, responses: list[dict]) -> None:
        """Hand each answer of a frame to its future, or to its batch's sink (one call per batch and frame)."""
        pending, messages = self._pending, self._messages
        batch: Batch | None = None
        offsets: list[int] = []
        answers: list[dict] = []
        for response in responses:
            rid = response.get("id")
            if rid is None and "ids" in response:  # answers in columns (protocol/answers.py)
                self._deliver(batch, offsets, answers)
                batch, offsets, answers = None, [], []
                self._route_columns(response)
                continue
            if pending:
                future = pending.pop(rid, None)
                if future is not None:
                    if messages is not None:
                        messages.pop(rid, None)
                    if not future.done():
                        future.set_result(response)
                    continue
            if batch is None or not (type(rid) is int and batch.start <= rid < batch.stop):
                self._deliver(batch, offsets, answers)
                offsets, answers = [], []
                batch = self._batch_of(rid)
                if batch is None:
                    if "error" in response:
                        log.warning("server error for no request: %s", response["error"])
                    continue
            offset = rid - batch.start
            if not batch.answered[offset]:
                batch.answered[offset] = 1
                offsets.append(offset)
                answers.append(response)
        self._deliver(batch, offsets, answers)

    def _route_columns(self, message: dict) -> None:
        """Hand the answers of a message of columns to their batches' sinks, a run of one batch at a time (and
        one by one as plain answers while single requests wait: some may be theirs)."""
        columns = answers_protocol.columns_of(message)
        ids: list = message["ids"]
        if self._pending:
            self._route([answers_protocol.unpacked(message, columns, k) for k in range(len(ids))])  # type: ignore[arg-type]
            return
        k, count = 0, len(ids)
        while k < count:
            batch = self._batch_of(ids[k])
            if batch is None:  # the answer of a batch given up
                k += 1
                continue
            start, stop, answered = batch.start, batch.stop, batch.answered
            offsets: list[int] = []
            positions: list[int] = []  # where in the message the run's answers are
            run = k
            while k < count and type(rid := ids[k]) is int and start <= rid < stop:
                if not answered[rid - start]:  # (an answer sent again after a resume comes once)
                    answered[rid - start] = 1
                    offsets.append(rid - start)
                    positions.append(k)
                k += 1
            if offsets:
                self._count(batch, len(offsets))
                batch.sink.answer_columns(offsets, message, range(run, k) if len(positions) == k - run else positions)

    def _route_error(self, batch: Batch, rid: int, error: Exception) -> None:
        offset = rid - batch.start
        if not batch.answered[offset]:
            batch.answered[offset] = 1
            self._deliver(batch, [offset], [error])

    def _deliver(self, batch: Batch | None, offsets: list[int], answers: list) -> None:
        if batch is None or not offsets:
            return
        self._count(batch, len(offsets))
        batch.sink.answer(offsets, answers)

    def _count(self, batch: Batch, answered: int) -> None:
        """`answered` more of the batch's requests have their answer: a batch fully answered is forgotten."""
        batch.remaining -= answered
        if batch.remaining == 0:
            self._forget(batch)

    def _batch_of(self, rid: object) -> Batch | None:
        if type(rid) is int:
            index = bisect_right(self._starts, rid) - 1
            if index >= 0:
                batch = self._batches[self._starts[index]]
                if rid < batch.stop:
                    return batch
        return None

    def _forget(self, batch: Batch) -> None:
        if self._batches.pop(batch.start, None) is not None:
            del self._starts[bisect_left(self._starts, batch.start)]

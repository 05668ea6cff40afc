"""What a resumable connection keeps so that every request is applied once, across a dropped connection.

After a drop the client resumes on a new connection and sends again, marked `"resent": true`, every request
whose answer it did not get. Each such request was either never received (it runs now), is still running
(its answer will come on the new connection), or was answered on the old one, the answer lost on the way:
then the answer kept here is sent again, and nothing runs twice.

A client sends a session's next request only once it holds the answer to the previous one, so the answer
to keep per session is its last: a new request naming a session lets its kept answer go. A lock-step batch
(`steps`, `resets`) is kept until a new request names its first session; a reset that created a session, until a
request names that session. Catalog requests (info, splits, tasks) are simply answered again.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from openenv_gym.episode.state import SESSION_ENDING_CODES
from openenv_gym.protocol import native as p

RUNNING = object()  # again(): the request still runs; its answer will come
MAX_BATCHES = 64  # lock-step answers kept per connection (a client has one per connection in flight)
MAX_ENDED = 1024  # answers that ended their sessions, kept per connection (nothing names those sessions again)
_KEPT_OPS = frozenset({p.OP_RESET, p.OP_RESETS, p.OP_STEP, p.OP_STEPS, p.OP_CLOSE})
_BATCH_OPS = frozenset({p.OP_STEPS, p.OP_RESETS})


class Replay:
    __slots__ = ("batch_of", "batches", "created", "creator", "ended", "last", "running")

    def __init__(self) -> None:
        self.running: dict[Any, tuple[str, Any]] = {}  # request id -> (op, its session or first session)
        self.last: dict[str, tuple[Any, dict]] = {}  # session -> (request id, answer) of its last request
        self.batches: OrderedDict[Any, dict] = OrderedDict()  # `steps` request id -> answer
        self.batch_of: dict[str, Any] = {}  # first session of a kept batch -> its request id
        self.created: dict[Any, dict] = {}  # id of a reset that created a session -> answer
        self.creator: dict[str, Any] = {}  # that session -> the reset's request id
        self.ended: OrderedDict[Any, dict] = OrderedDict()  # request id -> an answer that ended its session

    def again(self, rid: Any, message: dict) -> dict | object | None:
        """For a resent request: its kept answer, RUNNING, or None when it must run (it never arrived)."""
        if rid in self.running:
            return RUNNING
        if rid in self.ended:
            return self.ended[rid]
        if message.get("op") in _BATCH_OPS:
            return self.batches.get(rid)
        session = message.get("session")
        if session is None:
            return self.created.get(rid)
        kept = self.last.get(session) if type(session) is str else None
        return kept[1] if kept is not None and kept[0] == rid else None

    def started(self, rid: Any, message: dict) -> None:
        """A request arrives: the client holds every earlier answer for the sessions it names."""
        op = message.get("op")
        if op not in _KEPT_OPS:
            return
        session = message.get("session")
        if op in _BATCH_OPS:
            session = _first_session(message.get("sessions"))
        if session is not None and type(session) is not str:
            return  # a malformed request: answered with an error, which need not be kept
        if session is not None:
            self._delivered(session)
        self.running[rid] = (op, session)

    def _delivered(self, session: str) -> None:
        self.last.pop(session, None)
        if self.batch_of:
            self.batches.pop(self.batch_of.pop(session, None), None)
        if self.creator:
            self.created.pop(self.creator.pop(session, None), None)

    def answered(self, message: dict) -> None:
        """An answer leaves: keep it until the client shows it has it."""
        rid = message.get("id")
        entry = self.running.pop(rid, None)
        if entry is None:
            return
        op, session = entry
        error = message.get("error")
        if type(error) is dict and error.get("code") in SESSION_ENDING_CODES:  # (a steps answer has a column)
            if session is not None:
                self._delivered(session)
            self.ended[rid] = message
            if len(self.ended) > MAX_ENDED:
                self.ended.popitem(last=False)
            return
        if op in _BATCH_OPS:
            self.batches[rid] = message
            if op == p.OP_RESETS:  # the sessions it answered, new ones included
                session = _first_session(message.get("session"))
            if session is not None:
                self.batch_of[session] = rid
            while len(self.batches) > MAX_BATCHES:
                self.batches.popitem(last=False)
        elif op == p.OP_CLOSE:
            if session is not None:
                self._delivered(session)
        elif session is None:  # a reset that created a session (or a step that named none: an error)
            created = message.get("session")
            if op == p.OP_RESET and type(created) is str:
                self.created[rid] = message
                self.creator[created] = rid
        else:
            self.last[session] = (rid, message)


def _first_session(sessions: Any) -> Any:
    """The first session a batch names (a new session of a `resets` is null in the request)."""
    if type(sessions) is not list:
        return None
    return next((session for session in sessions if session is not None), None)

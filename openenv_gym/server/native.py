"""The native protocol front end: frames in, answers out, over the session core. No sockets here.

One `NativePeer` per connection owns that connection's sessions; `handle_frame(peer, data)` reads a
frame and answers each request through `peer.reply(message)`, at once or when the environment is done.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable
from functools import partial
from time import perf_counter
from typing import Any

from openenv_gym.episode.groups import GroupScore
from openenv_gym.errors import (
    BadFrameError,
    BadRequestError,
    EnvError,
    ProtocolError,
    ResumeFailedError,
    TooLargeError,
    UnknownOpError,
)
from openenv_gym.protocol import answers
from openenv_gym.protocol import native as p
from openenv_gym.protocol.outbox import Outbox
from openenv_gym.server.batch import ResetColumns, StepColumns
from openenv_gym.server.catalog import Catalog
from openenv_gym.server.core import ResetOutcome, SessionCore, StepOutcome
from openenv_gym.server.replay import RUNNING, Replay
from openenv_gym.server.sessions import Owner

log = logging.getLogger(__name__)

Reply = Callable[[dict], None]


def _nowhere(message: dict) -> None:
    """Where a dropped connection's answers go until it is resumed (the ones to keep are in its Replay)."""


class NativePeer(Owner):
    """One client connection: its sessions, and where its answers go. A resumable one outlives its socket for
    the resume window: it keeps its sessions and the answers to send again (`replay`), and is adopted by the
    connection that resumes it."""

    __slots__ = ("adopted", "detached_at", "hangup", "outbox", "replay", "reply", "send", "token")

    def __init__(self, send: Reply, hangup: Callable[[], None], outbox: Outbox | None = None) -> None:
        super().__init__()
        self.send = send  # the current connection's outbox (its put)
        self.outbox = outbox  # that outbox, where answers can be packed in columns (None: a front end's own sink)
        self.reply = send  # how answers leave: straight out, or kept then sent (resumable)
        self.hangup = hangup  # closes the current connection
        self.replay: Replay | None = None
        self.token: str | None = None
        self.adopted: NativePeer | None = None  # the peer this connection took over with `resume`
        self.detached_at = 0.0

    def make_resumable(self, token: str) -> None:
        self.token, self.replay, self.reply = token, Replay(), self._keep_and_send

    def _keep_and_send(self, message: dict) -> None:
        self.replay.answered(message)  # type: ignore[union-attr]
        self.send(message)


def server_info(description: dict[str, Any], core: SessionCore) -> dict[str, Any]:
    """What `info` and GET /info answer: the environment, its spaces, the protocol, the limits, and which
    worker process answers this connection (clients use it to spread sessions evenly over workers)."""
    limits = core.limits
    return {"env": description, "spaces": _spaces(description), "protocol": p.PROTOCOL_VERSION,
            "limits": {"max_sessions": limits.max_sessions, "step_timeout": limits.step_timeout,
                       "idle_timeout": limits.idle_timeout, "max_frame_bytes": limits.max_frame_bytes,
                       "max_action_chars": limits.max_action_chars, "frame_timeout": limits.frame_timeout,
                       "resume_window": limits.resume_window, "group_timeout": limits.group_timeout},
            "worker": core.counter.index, "workers": core.counter.workers}


class NativeFrontEnd:
    def __init__(self, core: SessionCore, catalog: Catalog) -> None:
        self.core = core
        self.catalog = catalog
        self.info = server_info(core.description, core)
        self.max_frame_bytes = core.limits.max_frame_bytes
        self._ops: dict[str, Callable[[NativePeer, p.RequestId, dict], None]] = {
            p.OP_STEP: self._step, p.OP_STEPS: self._steps, p.OP_RESET: self._reset, p.OP_RESETS: self._resets,
            p.OP_STATE: self._state, p.OP_CLOSE: self._close, p.OP_GROUP: self._group,
            p.OP_INFO: self._info, p.OP_SPLITS: self._splits, p.OP_TASKS: self._tasks,
            p.OP_RESUMABLE: self._resumable, p.OP_RESUME: self._resume, p.OP_COLUMNS: self._columns}
        self.resume_window = core.limits.resume_window
        self.resumable: dict[str, NativePeer] = {}  # token -> its peer, attached or dropped
        self.dropped: dict[str, NativePeer] = {}  # token -> a peer whose connection dropped, kept to be resumed

    def connect(self, send: Reply, hangup: Callable[[], None], outbox: Outbox | None = None) -> NativePeer:
        """A new connection: answers go to `send` (its `outbox`'s put); `hangup()` closes it (when another connection
        takes over)."""
        return NativePeer(send, hangup, outbox)

    def disconnect(self, peer: NativePeer, send: Reply, resumable: bool = False) -> None:
        """The connection whose outbox is `send` closed; `peer` is the one it served last. Its sessions end,
        unless it may be `resumable` (it dropped, it was not closed) and asked to be."""
        if peer.send is not send:
            return  # another connection resumed this peer meanwhile: it is not ours to end
        if not resumable or peer.token is None or not (peer.sessions or peer.replay.running):  # type: ignore[union-attr]
            self._forget(peer)
            return
        peer.send = _nowhere
        peer.detached_at = self.core.loop.time()
        self.dropped[peer.token] = peer

    def _forget(self, peer: NativePeer) -> None:
        if peer.token is not None:
            self.resumable.pop(peer.token, None)
            self.dropped.pop(peer.token, None)
        self.core.drop(peer)

    def expire_dropped(self, now: float) -> int:
        """End the sessions of dropped connections not resumed within the window; return how many connections."""
        expired = [peer for peer in self.dropped.values() if now - peer.detached_at > self.resume_window]
        for peer in expired:
            self._forget(peer)
        return len(expired)

    def shutdown(self) -> None:
        for peer in list(self.dropped.values()):
            self._forget(peer)

    def handle_frame(self, peer: NativePeer, data: str | bytes) -> NativePeer:
        """Answer the requests of a frame; return the peer the connection serves from now on (a `resume`
        makes it adopt the dropped connection's)."""
        if type(data) is not str:
            peer.reply(p.error_response(None, BadFrameError(
                "binary frames are not accepted; send JSON in a text frame")))
            return peer
        if len(data) > self.max_frame_bytes:
            peer.reply(p.error_response(None, TooLargeError(
                f"frame of {len(data)} characters is over the limit of {self.max_frame_bytes}; "
                "split the batch over several frames")))
            return peer
        try:
            messages = p.decode_frame(data)
        except BadFrameError as exc:
            peer.reply(p.error_response(None, exc))
            return peer
        ops = self._ops
        for message in messages:
            try:
                # valid requests pass these cheap checks; check_request explains what is wrong otherwise
                handler = ops.get(message.get("op")) if type(message) is dict else None
                rid = message.get("id") if handler is not None else None
                if handler is None or (type(rid) is not int and type(rid) is not str):
                    rid, op = p.check_request(message)
                    raise UnknownOpError(f"unknown op {op!r}; use one of {', '.join(p.OPS)}")
                replay = peer.replay
                if replay is not None:  # a resumable connection: a request sent again is applied once
                    if message.get("resent"):
                        again = replay.again(rid, message)
                        if again is RUNNING:
                            continue
                        if again is not None:
                            peer.send(again)
                            continue
                    replay.started(rid, message)
                handler(peer, rid, message)
                if peer.adopted is not None:
                    peer = peer.adopted
            except ProtocolError as exc:
                peer.reply(p.error_response(p.request_id(message), exc))
            except TypeError:  # an unhashable op (a list, say)
                peer.reply(p.error_response(p.request_id(message), BadRequestError("field 'op' must be a string")))
        return peer

    # -- episode ops ---------------------------------------------------------------------------

    def _reset(self, peer: NativePeer, rid: p.RequestId, message: dict) -> None:
        seed = p.optional_field(message, "seed", int, "an integer")
        options = p.optional_field(message, "options", dict, "an object")

        def answer(session_id: str, outcome: ResetOutcome) -> None:
            sendable = outcome if isinstance(outcome, ProtocolError) else self._sendable(
                peer, session_id, outcome.obs, outcome.info)
            if isinstance(sendable, ProtocolError):
                peer.reply(p.error_response(rid, sendable))
            else:
                peer.reply(p.reset_response(rid, session_id, *sendable))

        self.core.reset(peer, message.get("session"), seed, options, answer)

    def _resets(self, peer: NativePeer, rid: p.RequestId, message: dict) -> None:
        """Many resets in one request, each entry as a `reset` of its own, answered with one response of columns
        once all are done."""
        sessions, seeds, options = message.get("sessions"), message.get("seeds"), message.get("options")
        if (type(sessions) is not list or type(seeds) is not list or type(options) is not list or not sessions
                or not len(sessions) == len(seeds) == len(options)):
            raise BadRequestError("'resets' needs 'sessions', 'seeds' and 'options': arrays of the same non-zero "
                                  "length (null entries: a new session, no seed, no options)")

        def answer(columns: ResetColumns) -> None:
            obs, infos = self._sendable_columns(peer, columns.sessions, columns)
            errors = None if columns.errors is None else [e and e.to_wire() for e in columns.errors]
            peer.reply(p.resets_response(rid, columns.sessions, obs, infos, errors))

        columns = ResetColumns(len(sessions), answer)
        for k, session in enumerate(sessions):
            try:
                seed = p.optional_value(seeds[k], "seed", int, "an integer")
                entry_options = p.optional_value(options[k], "options", dict, "an object")
                self.core.reset(peer, session, seed, entry_options, partial(columns.put, k))
            except ProtocolError as exc:
                columns.put(k, None, exc)

    def _step(self, peer: NativePeer, rid: p.RequestId, message: dict) -> None:
        if "action" not in message and message.get("session") is not None:
            raise BadRequestError("field 'action' is missing: send model text or a tool call object")

        session_id = message.get("session")
        arrived = perf_counter()

        def answer(outcome: StepOutcome) -> None:
            self.core.metrics.step_answered(perf_counter() - arrived)
            sendable = outcome if isinstance(outcome, ProtocolError) else self._sendable(
                peer, session_id, outcome.obs, outcome.info)
            if isinstance(sendable, ProtocolError):
                peer.reply(p.error_response(rid, sendable))
            else:
                obs, info = sendable
                peer.reply(p.step_response(rid, obs, outcome.reward, outcome.terminated, outcome.truncated, info))

        self.core.step(peer, session_id, message.get("action"), answer)

    def _steps(self, peer: NativePeer, rid: p.RequestId, message: dict) -> None:
        """Many steps in one request, answered with one response of columns once all are done."""
        sessions, actions = message.get("sessions"), message.get("actions")
        if type(sessions) is not list or type(actions) is not list or len(sessions) != len(actions) or not sessions:
            raise BadRequestError("'steps' needs 'sessions' and 'actions': arrays of the same non-zero length")
        arrived = perf_counter()

        def answer(columns: StepColumns) -> None:
            self.core.metrics.step_answered(perf_counter() - arrived)
            obs, infos = self._sendable_columns(peer, sessions, columns)
            errors = None if columns.errors is None else [e and e.to_wire() for e in columns.errors]
            peer.reply(p.steps_response(rid, obs, columns.rewards, columns.terminated, columns.truncated, infos,
                                        errors))

        self.core.step_many(peer, sessions, actions, answer)

    def _state(self, peer: NativePeer, rid: p.RequestId, message: dict) -> None:
        peer.reply(p.state_response(rid, self.core.state(peer, p.required_session(message))))

    def _close(self, peer: NativePeer, rid: p.RequestId, message: dict) -> None:
        self.core.close(peer, p.required_session(message))
        peer.reply(p.close_response(rid))

    def _group(self, peer: NativePeer, rid: p.RequestId, message: dict) -> None:
        group = message.get("group")

        def answer(outcome: GroupScore | ProtocolError) -> None:
            if isinstance(outcome, GroupScore):
                try:
                    infos = p.encoded(outcome.infos)
                except TypeError as exc:
                    outcome = EnvError(f"score_group returned infos JSON cannot carry ({exc}); keep them to JSON types")
                else:
                    peer.reply(p.group_response(rid, group, outcome.members, outcome.rewards, infos))
                    return
            peer.reply(p.error_response(rid, outcome))

        self.core.groups.score(peer, group, message.get("members"), answer)

    # -- results JSON cannot carry: encoded once, here; one that fails ends its session -------------------

    def _sendable(self, peer: NativePeer, session_id: Any, obs: str, info: dict) -> tuple[Any, Any] | EnvError:
        """(obs, info) ready to send (encoded when they might fail), or the error that ended the session."""
        if obs.isascii() and not info:  # nothing that could fail (a lone surrogate is not ASCII)
            return obs, info
        try:
            return (obs if obs.isascii() else p.encoded(obs)), (p.encoded(info) if info else info)
        except TypeError as exc:
            return self.core.end_unsendable(peer, session_id, str(exc))

    def _sendable_columns(self, peer: NativePeer, sessions: list,
                          columns: StepColumns | ResetColumns) -> tuple[Any, Any]:
        """The obs and info columns encoded (once: the frame embeds them as they are); an entry JSON cannot carry
        fails alone, with its session ended."""
        try:
            return p.encoded(columns.obs), p.encoded(columns.infos)
        except TypeError:
            pass
        for k, (obs, info) in enumerate(zip(columns.obs, columns.infos, strict=True)):
            problem = p.unencodable(obs) or p.unencodable(info)
            if problem is not None:
                if columns.errors is None:
                    columns.errors = [None] * len(columns.obs)
                columns.errors[k] = self.core.end_unsendable(peer, sessions[k], problem)
                columns.obs[k], columns.infos[k] = "", {}
        return p.encoded(columns.obs), p.encoded(columns.infos)

    # -- resuming after a dropped connection -----------------------------------------------------------

    def _resumable(self, peer: NativePeer, rid: p.RequestId, message: dict) -> None:
        counter = self.core.counter
        if self.resume_window > 0 and peer.token is None:
            # the worker's index first: a resume that reaches another worker process can say so
            peer.make_resumable(f"{counter.index}.{secrets.token_urlsafe(24)}")
            self.resumable[peer.token] = peer  # type: ignore[index]
        peer.reply(p.resumable_response(rid, peer.token or "", self.resume_window, counter.index, counter.workers))

    def _resume(self, peer: NativePeer, rid: p.RequestId, message: dict) -> None:
        token = message.get("token")
        if type(token) is not str:
            raise BadRequestError("'resume' needs 'token': the string a 'resumable' request answered")
        worker = self.core.counter.index
        target = self.resumable.get(token)
        if target is None and token.partition(".")[0] != str(worker):
            peer.reply(p.resume_response(rid, False, worker))  # the token's worker is another process
            return
        if target is None:
            raise ResumeFailedError(
                f"no dropped connection holds this token: it was not resumed within the resume window "
                f"({self.resume_window:g} s), or the server restarted; its sessions are gone, reset to start new ones")
        if peer.sessions or (peer.replay is not None and peer.replay.running):
            raise BadRequestError("resume on a fresh connection, before it starts sessions of its own")
        if target is not peer:
            if self.dropped.pop(token, None) is None:
                target.hangup()  # the old connection has not noticed it dropped: this one takes over
            target.send, target.hangup, target.outbox = peer.send, peer.hangup, peer.outbox
            self._forget(peer)
            peer.adopted = target
        target.reply(p.resume_response(rid, True, worker))

    def _columns(self, peer: NativePeer, rid: p.RequestId, message: dict) -> None:
        """From now on, this connection's plain step and reset answers leave in columns (protocol/answers.py)."""
        if peer.outbox is not None:
            peer.outbox.pack = answers.packed
        peer.reply(answers.columns_response(rid, peer.outbox is not None))

    # -- catalog ops ---------------------------------------------------------------------------

    def current_info(self) -> dict[str, Any]:
        """`info` with this worker's counts of GRPO groups (server/groups.py)."""
        return {**self.info, "groups": self.core.groups.counters()}

    def _info(self, peer: NativePeer, rid: p.RequestId, message: dict) -> None:
        peer.reply(p.info_response(rid, self.current_info()))

    def _splits(self, peer: NativePeer, rid: p.RequestId, message: dict) -> None:
        self._answer_when_done(peer, rid, self.catalog.splits(), lambda splits: p.splits_response(rid, splits))

    def _tasks(self, peer: NativePeer, rid: p.RequestId, message: dict) -> None:
        split = p.optional_field(message, "split", str, "a string")
        start = p.optional_field(message, "start", int, "an integer")
        stop = p.optional_field(message, "stop", int, "an integer")
        self._answer_when_done(peer, rid, self.catalog.tasks(split, start, stop),
                               lambda listing: p.tasks_response(rid, listing))

    def _answer_when_done(self, peer: NativePeer, rid: p.RequestId, coro: Awaitable,
                          respond: Callable[[Any], dict]) -> None:
        """Answer a request that needs no session with `respond(await coro)`; inline if it never waits."""

        async def answer() -> dict:
            try:
                return respond(await coro)
            except ProtocolError as exc:
                return p.error_response(rid, exc)
            except Exception as exc:
                log.exception("catalog request failed")
                return p.error_response(rid, EnvError(f"the environment raised {type(exc).__name__}: {exc}"))

        done, value = self.core.eager.start(answer())
        if done:
            peer.reply(value)
        else:
            value.add_done_callback(lambda task: task.cancelled() or peer.reply(task.result()))


def _spaces(description: dict[str, Any]) -> dict[str, Any]:
    """The Gymnasium spaces clients build for this env (see openenv_gym.spaces), as data."""
    if description.get("action") == "tools":
        action = {"type": "ToolCallSpace", "tools": [t["name"] for t in description.get("tools", [])],
                  "accepts": "a tool call {name, arguments} or model text holding one"}
    else:
        action = {"type": "UnicodeText", "accepts": "any Unicode text"}
    return {"observation": {"type": "UnicodeText", "accepts": "any Unicode text"}, "action": action}

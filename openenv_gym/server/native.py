"""The native protocol front end: frames in, answers out, over the session core. No sockets here.

One `NativePeer` per connection owns that connection's sessions; `handle_frame(peer, data)` reads a
frame and answers each request through `peer.reply(message)`, at once or when the environment is done.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from openenv_gym.errors import BadFrameError, BadRequestError, EnvError, ProtocolError, TooLargeError, UnknownOpError
from openenv_gym.protocol import native as p
from openenv_gym.runtime.eager import start_eagerly
from openenv_gym.server.batch import StepColumns
from openenv_gym.server.catalog import Catalog
from openenv_gym.server.core import ResetOutcome, SessionCore, StepOutcome
from openenv_gym.server.sessions import Owner

log = logging.getLogger(__name__)

Reply = Callable[[dict], None]


class NativePeer(Owner):
    """One connection: its sessions, and where its answers go."""

    __slots__ = ("reply",)

    def __init__(self, reply: Reply) -> None:
        super().__init__()
        self.reply = reply


def server_info(description: dict[str, Any], core: SessionCore) -> dict[str, Any]:
    """What `info` and GET /info answer: the environment, its spaces, the protocol, the limits, and which
    worker process answers this connection (clients use it to spread sessions evenly over workers)."""
    limits = core.limits
    return {"env": description, "spaces": _spaces(description), "protocol": p.PROTOCOL_VERSION,
            "limits": {"max_sessions": limits.max_sessions, "step_timeout": limits.step_timeout,
                       "idle_timeout": limits.idle_timeout, "max_frame_bytes": limits.max_frame_bytes,
                       "max_action_chars": limits.max_action_chars, "frame_timeout": limits.frame_timeout},
            "worker": core.counter.index, "workers": core.counter.workers}


class NativeFrontEnd:
    def __init__(self, core: SessionCore, catalog: Catalog) -> None:
        self.core = core
        self.catalog = catalog
        self.info = server_info(core.description, core)
        self.max_frame_bytes = core.limits.max_frame_bytes
        self._ops: dict[str, Callable[[NativePeer, p.RequestId, dict], None]] = {
            p.OP_STEP: self._step, p.OP_STEPS: self._steps, p.OP_RESET: self._reset, p.OP_STATE: self._state,
            p.OP_CLOSE: self._close,
            p.OP_INFO: self._info, p.OP_SPLITS: self._splits, p.OP_TASKS: self._tasks}

    def connect(self, reply: Reply) -> NativePeer:
        return NativePeer(reply)

    def disconnect(self, peer: NativePeer) -> None:
        self.core.drop(peer)

    def handle_frame(self, peer: NativePeer, data: str | bytes) -> None:
        if type(data) is not str:
            peer.reply(p.error_response(None, BadFrameError(
                "binary frames are not accepted; send JSON in a text frame")))
            return
        if len(data) > self.max_frame_bytes:
            peer.reply(p.error_response(None, TooLargeError(
                f"frame of {len(data)} characters is over the limit of {self.max_frame_bytes}; "
                "split the batch over several frames")))
            return
        try:
            messages = p.decode_frame(data)
        except BadFrameError as exc:
            peer.reply(p.error_response(None, exc))
            return
        ops = self._ops
        for message in messages:
            try:
                # valid requests pass these cheap checks; check_request explains what is wrong otherwise
                handler = ops.get(message.get("op")) if type(message) is dict else None
                rid = message.get("id") if handler is not None else None
                if handler is None or (type(rid) is not int and type(rid) is not str):
                    rid, op = p.check_request(message)
                    raise UnknownOpError(f"unknown op {op!r}; use one of {', '.join(p.OPS)}")
                handler(peer, rid, message)
            except ProtocolError as exc:
                peer.reply(p.error_response(p.request_id(message), exc))
            except TypeError:  # an unhashable op (a list, say)
                peer.reply(p.error_response(p.request_id(message), BadRequestError("field 'op' must be a string")))

    # -- episode ops ---------------------------------------------------------------------------

    def _reset(self, peer: NativePeer, rid: p.RequestId, message: dict) -> None:
        seed = p.optional_field(message, "seed", int, "an integer")
        options = p.optional_field(message, "options", dict, "an object")

        def answer(session_id: str, outcome: ResetOutcome) -> None:
            if isinstance(outcome, ProtocolError):
                peer.reply(p.error_response(rid, outcome))
            else:
                peer.reply(p.reset_response(rid, session_id, outcome.obs, outcome.info))

        self.core.reset(peer, message.get("session"), seed, options, answer)

    def _step(self, peer: NativePeer, rid: p.RequestId, message: dict) -> None:
        if "action" not in message and message.get("session") is not None:
            raise BadRequestError("field 'action' is missing: send model text or a tool call object")

        def answer(outcome: StepOutcome) -> None:
            if isinstance(outcome, ProtocolError):
                peer.reply(p.error_response(rid, outcome))
            else:
                peer.reply(p.step_response(rid, outcome.obs, outcome.reward, outcome.terminated, outcome.truncated,
                                           outcome.info))

        self.core.step(peer, message.get("session"), message.get("action"), answer)

    def _steps(self, peer: NativePeer, rid: p.RequestId, message: dict) -> None:
        """Many steps in one request, answered with one response of columns once all are done."""
        sessions, actions = message.get("sessions"), message.get("actions")
        if type(sessions) is not list or type(actions) is not list or len(sessions) != len(actions) or not sessions:
            raise BadRequestError("'steps' needs 'sessions' and 'actions': arrays of the same non-zero length")

        def answer(columns: StepColumns) -> None:
            errors = None if columns.errors is None else [e and e.to_wire() for e in columns.errors]
            peer.reply(p.steps_response(rid, columns.obs, columns.rewards, columns.terminated, columns.truncated,
                                        columns.infos, errors))

        self.core.step_many(peer, sessions, actions, answer)

    def _state(self, peer: NativePeer, rid: p.RequestId, message: dict) -> None:
        peer.reply(p.state_response(rid, self.core.state(peer, p.required_session(message))))

    def _close(self, peer: NativePeer, rid: p.RequestId, message: dict) -> None:
        self.core.close(peer, p.required_session(message))
        peer.reply(p.close_response(rid))

    # -- catalog ops ---------------------------------------------------------------------------

    def _info(self, peer: NativePeer, rid: p.RequestId, message: dict) -> None:
        peer.reply(p.info_response(rid, self.info))

    def _splits(self, peer: NativePeer, rid: p.RequestId, message: dict) -> None:
        _answer_when_done(peer, rid, self.catalog.splits(), lambda splits: p.splits_response(rid, splits))

    def _tasks(self, peer: NativePeer, rid: p.RequestId, message: dict) -> None:
        split = p.optional_field(message, "split", str, "a string")
        start = p.optional_field(message, "start", int, "an integer")
        stop = p.optional_field(message, "stop", int, "an integer")
        _answer_when_done(peer, rid, self.catalog.tasks(split, start, stop),
                          lambda listing: p.tasks_response(rid, listing))


def _answer_when_done(peer: NativePeer, rid: p.RequestId, coro: Awaitable, respond: Callable[[Any], dict]) -> None:
    """Answer a request that needs no session with `respond(await coro)`; inline if it never waits."""

    async def answer() -> dict:
        try:
            return respond(await coro)
        except ProtocolError as exc:
            return p.error_response(rid, exc)
        except Exception as exc:
            log.exception("catalog request failed")
            return p.error_response(rid, EnvError(f"the environment raised {type(exc).__name__}: {exc}"))

    done, value = start_eagerly(answer())
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

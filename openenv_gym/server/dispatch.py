"""Answer protocol requests: the session table of one worker process and the ops on it.

The dispatcher knows the protocol and the Environment interface, nothing of sockets: a `Peer`
(one per connection) receives its answers. Cheap steps run inline (see eager.py); a step that has
to wait runs in a task bounded by the step timeout. An exception or a timeout inside one session
ends that session with a typed error and touches nothing else.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from openenv_gym import protocol as p
from openenv_gym.environment import Environment, ResetResult, StepResult
from openenv_gym.errors import (
    BadFrameError,
    BadRequestError,
    CapacityError,
    EnvError,
    InvalidActionError,
    NoEpisodeError,
    ProtocolError,
    StepTimeoutError,
    TooLargeError,
    UnknownOpError,
    UnknownSessionError,
)
from openenv_gym.server.catalog import Catalog
from openenv_gym.server.eager import continue_in_task, start_eagerly
from openenv_gym.server.sessions import Session, SessionCounter, new_session_id

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Limits:
    max_sessions: int = 10_000
    step_timeout: float = 60.0  # seconds one reset or step may take before its session is ended
    idle_timeout: float = 900.0  # seconds a session may sit unused before it is reaped
    max_frame_bytes: int = p.DEFAULT_MAX_FRAME_BYTES


class Peer:
    """What the dispatcher needs of a connection: its sessions and a way to answer."""

    __slots__ = ("reply", "sessions")

    def __init__(self, reply: Callable[[dict], None]) -> None:
        self.reply = reply
        self.sessions: dict[str, Session] = {}


def _short(session_id: str) -> str:
    return session_id[:8] + "…"


class Dispatcher:
    def __init__(self, factory: Callable[[], Environment], description: dict[str, Any], limits: Limits,
                 counter: SessionCounter) -> None:
        self.factory = factory
        self.limits = limits
        self.counter = counter
        self.sessions: dict[str, Session] = {}  # every session of this worker, for the reaper
        self.loop = asyncio.get_running_loop()
        self.info = {"env": description, "spaces": _spaces(description), "protocol": p.PROTOCOL_VERSION,
                     "limits": {"max_sessions": limits.max_sessions, "step_timeout": limits.step_timeout,
                                "idle_timeout": limits.idle_timeout,
                                "max_frame_bytes": limits.max_frame_bytes},
                     # which worker process answers this connection: lets clients spread sessions evenly
                     "worker": counter.index, "workers": counter.workers}
        self.catalog = Catalog(factory, description.get("name", ""))
        self._ops = {p.OP_STEP: self._step, p.OP_STEPS: self._steps, p.OP_RESET: self._reset,
                     p.OP_CLOSE: self._close, p.OP_INFO: self._info, p.OP_SPLITS: self._splits,
                     p.OP_TASKS: self._tasks}

    # -- frames and requests ------------------------------------------------------------------

    def handle_frame(self, peer: Peer, data: str | bytes) -> None:
        if type(data) is not str:
            peer.reply(p.error_response(None, BadFrameError(
                "binary frames are not accepted; send JSON in a text frame")))
            return
        if len(data) > self.limits.max_frame_bytes:
            peer.reply(p.error_response(None, TooLargeError(
                f"frame of {len(data)} characters is over the limit of {self.limits.max_frame_bytes}; "
                "split the batch over several frames")))
            return
        try:
            messages = p.decode_frame(data)
        except BadFrameError as exc:
            peer.reply(p.error_response(None, exc))
            return
        now = self.loop.time()
        ops = self._ops
        for message in messages:
            try:
                # valid requests pass these cheap checks; check_request explains what is wrong otherwise
                handler = ops.get(message.get("op")) if type(message) is dict else None
                rid = message.get("id") if handler is not None else None
                if handler is None or (type(rid) is not int and type(rid) is not str):
                    rid, op = p.check_request(message)
                    raise UnknownOpError(f"unknown op {op!r}; use one of {', '.join(p.OPS)}")
                handler(peer, rid, message, now)
            except ProtocolError as exc:
                peer.reply(p.error_response(p.request_id(message), exc))
            except TypeError:  # an unhashable op or session (a list, say)
                peer.reply(p.error_response(p.request_id(message), BadRequestError(
                    "fields 'op' and 'session' must be strings")))

    def _session_of(self, peer: Peer, message: dict) -> Session:
        session_id = p.required_session(message)
        session = peer.sessions.get(session_id)
        if session is None:
            raise UnknownSessionError(
                f"no session {_short(session_id)} on this connection: it was closed, reaped or ended, "
                "or belongs to another connection; reset without a session id to start a new one")
        if session.busy:
            raise BadRequestError(f"session {_short(session_id)} is still answering an earlier request; "
                                  "wait for that answer before sending the next")
        return session

    # -- ops ---------------------------------------------------------------------------------

    def _info(self, peer: Peer, rid: p.RequestId, message: dict, now: float) -> None:
        peer.reply(p.info_response(rid, self.info))

    def _splits(self, peer: Peer, rid: p.RequestId, message: dict, now: float) -> None:
        self._answer(peer, rid, self.catalog.splits(), lambda splits: p.splits_response(rid, splits))

    def _tasks(self, peer: Peer, rid: p.RequestId, message: dict, now: float) -> None:
        split = p.optional_field(message, "split", str, "a string")
        start = p.optional_field(message, "start", int, "an integer")
        stop = p.optional_field(message, "stop", int, "an integer")
        self._answer(peer, rid, self.catalog.tasks(split, start, stop),
                     lambda found: p.tasks_response(rid, found[0], found[1]))

    def _answer(self, peer: Peer, rid: p.RequestId, coro: Any, respond: Callable[[Any], dict]) -> None:
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

    def _step(self, peer: Peer, rid: p.RequestId, message: dict, now: float) -> None:
        session = peer.sessions.get(message.get("session"))
        action = message.get("action")
        if (session is None or not session.live or session.task is not None
                or (type(action) is not str and type(action) is not dict)):
            self._refuse_step(peer, message)
        session.last_active = now
        self._run(peer, session, rid, session.env.step(action), self._stepped)

    def _steps(self, peer: Peer, rid: p.RequestId, message: dict, now: float) -> None:
        """Many steps in one request, answered with one response of columns once all are done.

        Each entry runs exactly like a `step` (same checks, errors and timeouts); its answer is
        written into the columns instead of being sent on its own.
        """
        sessions, actions = message.get("sessions"), message.get("actions")
        if type(sessions) is not list or type(actions) is not list or len(sessions) != len(actions) or not sessions:
            raise BadRequestError("'steps' needs 'sessions' and 'actions': arrays of the same non-zero length")
        columns = _Columns(peer, rid, len(sessions))
        for index, (session_id, action) in enumerate(zip(sessions, actions, strict=True)):
            slot = _Slot(columns, index, peer.sessions)
            entry = {"session": session_id, "action": action}
            try:
                self._step(slot, index, entry, now)
            except ProtocolError as exc:
                slot.reply(p.error_response(index, exc))
            except TypeError:  # an unhashable session id
                slot.reply(p.error_response(index, BadRequestError("each session id must be a string")))

    def _refuse_step(self, peer: Peer, message: dict) -> None:
        """Raise the typed error that explains why this step cannot run."""
        if message.get("session") is None:
            raise NoEpisodeError("step before reset: this request names no session; "
                                 "call reset first, it creates the session")
        session = self._session_of(peer, message)
        if "action" not in message:
            raise BadRequestError("field 'action' is missing: send model text or a tool call object")
        action = message["action"]
        if type(action) is not str and type(action) is not dict:
            raise InvalidActionError(
                f"an action is model text (a string) or a tool call object, got a JSON "
                f"{p.json_type_name(action)}")
        raise NoEpisodeError(f"session {_short(session.id)} has no running episode (it ended, or "
                             "was never reset); call reset to start one")

    def _reset(self, peer: Peer, rid: p.RequestId, message: dict, now: float) -> None:
        seed = p.optional_field(message, "seed", int, "an integer")
        options = p.optional_field(message, "options", dict, "an object")
        if message.get("session") is None:
            session = self._open_session(peer, now)
            created = True
        else:
            session = self._session_of(peer, message)
            created = False
        session.live = False
        session.last_active = now
        try:
            coro = session.env.reset(seed=seed, options=options)
        except Exception:
            if created:
                self.end_session(session)
            raise
        self._run(peer, session, rid, coro, self._was_reset, created)

    def _close(self, peer: Peer, rid: p.RequestId, message: dict, now: float) -> None:
        session_id = p.required_session(message)
        session = peer.sessions.get(session_id)
        if session is None:
            raise UnknownSessionError(f"no session {_short(session_id)} on this connection to close")
        self.end_session(session)
        peer.reply(p.close_response(rid))

    # -- sessions ----------------------------------------------------------------------------

    def _open_session(self, peer: Peer, now: float) -> Session:
        if not self.counter.try_acquire():
            raise CapacityError(
                f"the server holds its maximum of {self.limits.max_sessions} sessions; close finished "
                "sessions, wait, or use another server")
        try:
            env = self.factory()
        except Exception as exc:
            self.counter.release()
            log.exception("creating an environment failed")
            raise EnvError(f"creating the environment failed: {type(exc).__name__}: {exc}") from None
        session = Session(new_session_id(), env, peer, now)
        peer.sessions[session.id] = session
        self.sessions[session.id] = session
        return session

    def end_session(self, session: Session) -> None:
        """Forget a session and close its environment. Safe to call twice."""
        if self.sessions.pop(session.id, None) is None:
            return
        session.owner.sessions.pop(session.id, None)
        session.live = False
        self.counter.release()
        if session.task is not None:
            session.task.cancel()
            session.task = None
        try:
            done, task = start_eagerly(session.env.close())
            if not done:
                task.add_done_callback(_log_close_failure)
        except Exception:
            log.exception("closing an environment failed")

    def drop_peer(self, peer: Peer) -> None:
        """The connection closed: end all its sessions."""
        for session in list(peer.sessions.values()):
            self.end_session(session)

    def reap_idle(self, now: float) -> int:
        """End sessions unused for longer than the idle timeout; return how many."""
        cutoff = now - self.limits.idle_timeout
        idle = [s for s in self.sessions.values() if s.last_active < cutoff and not s.busy]
        for session in idle:
            self.end_session(session)
        return len(idle)

    # -- running environment code ------------------------------------------------------------

    def _run(self, peer: Peer, session: Session, rid: p.RequestId, coro: Any, on_result: Callable,
             *extra: Any) -> None:
        # Run inline until the environment first waits (see eager.py); most steps never do.
        try:
            yielded = coro.send(None)
        except StopIteration as stop:
            on_result(peer, session, rid, stop.value, *extra)
            return
        except ProtocolError as exc:  # the environment refused the request with a typed error
            self._refused(peer, session, rid, exc, *extra)
            return
        except Exception as exc:
            self._failed(peer, session, rid, exc)
            return
        value = continue_in_task(coro, yielded)
        session.task = value
        timer = self.loop.call_later(self.limits.step_timeout, self._time_out, session, value)
        value.add_done_callback(lambda task: self._finished(task, timer, peer, session, rid, on_result, *extra))

    def _time_out(self, session: Session, task: asyncio.Task) -> None:
        session.timed_out = True
        task.cancel()

    def _finished(self, task: asyncio.Task, timer: asyncio.TimerHandle, peer: Peer, session: Session,
                  rid: p.RequestId, on_result: Callable, *extra: Any) -> None:
        timer.cancel()
        if session.task is not task:  # the session ended meanwhile (closed, reaped, disconnected)
            return
        session.task = None
        if task.cancelled():
            if session.timed_out:
                self.end_session(session)
                peer.reply(p.error_response(rid, StepTimeoutError(
                    f"the environment took longer than the step timeout ({self.limits.step_timeout:g} s); "
                    "its session is ended, reset without a session id to start a new one")))
            return
        exc = task.exception()
        if isinstance(exc, ProtocolError):
            self._refused(peer, session, rid, exc, *extra)
        elif exc is not None:
            self._failed(peer, session, rid, exc)
        else:
            on_result(peer, session, rid, task.result(), *extra)

    def _refused(self, peer: Peer, session: Session, rid: p.RequestId, exc: ProtocolError,
                 created: bool = False) -> None:
        if created:  # a session whose first reset failed was never handed out: drop it
            self.end_session(session)
        peer.reply(p.error_response(rid, exc))

    def _failed(self, peer: Peer, session: Session, rid: p.RequestId, exc: BaseException) -> None:
        log.error("environment error in session %s", _short(session.id), exc_info=exc)
        self.end_session(session)
        peer.reply(p.error_response(rid, EnvError(
            f"the environment raised {type(exc).__name__}: {exc}; its session is ended, "
            "reset without a session id to start a new one")))

    def _stepped(self, peer: Peer, session: Session, rid: p.RequestId, result: Any) -> None:
        if type(result) is not StepResult or type(result.obs) is not str or type(result.info) is not dict:
            self._failed(peer, session, rid, TypeError(
                f"step must return a StepResult(obs: str, ..., info: dict), got {result!r:.200}"))
            return
        reward = result.reward
        if type(reward) is not float:
            try:
                reward = float(reward)
            except (TypeError, ValueError):
                self._failed(peer, session, rid, TypeError(f"reward must be a number, got {reward!r:.100}"))
                return
        terminated, truncated = bool(result.terminated), bool(result.truncated)
        if terminated or truncated:
            session.live = False
        peer.reply(p.step_response(rid, result.obs, reward, terminated, truncated, result.info))

    def _was_reset(self, peer: Peer, session: Session, rid: p.RequestId, result: Any,
                   created: bool = False) -> None:
        if type(result) is not ResetResult or type(result.obs) is not str or type(result.info) is not dict:
            self._failed(peer, session, rid, TypeError(
                f"reset must return a ResetResult(obs: str, info: dict), got {result!r:.200}"))
            return
        session.live = True
        peer.reply(p.reset_response(rid, session.id, result.obs, result.info))


class _Columns:
    """The answer to a `steps` request, filled entry by entry, sent when the last entry is in."""

    __slots__ = ("errors", "infos", "obs", "peer", "remaining", "rewards", "rid", "terminated", "truncated")

    def __init__(self, peer: Peer, rid: p.RequestId, size: int) -> None:
        self.peer, self.rid, self.remaining = peer, rid, size
        self.obs: list[str] = [""] * size
        self.rewards: list[float] = [0.0] * size
        self.terminated: list[bool] = [False] * size
        self.truncated: list[bool] = [False] * size
        self.infos: list[dict] = [{}] * size
        self.errors: list[dict | None] | None = None

    def fill(self, index: int, answer: dict) -> None:
        error = answer.get("error")
        if error is None:
            self.obs[index], self.rewards[index], self.infos[index] = answer["obs"], answer["reward"], answer["info"]
            self.terminated[index], self.truncated[index] = answer["terminated"], answer["truncated"]
        else:
            if self.errors is None:
                self.errors = [None] * len(self.obs)
            self.errors[index] = error
        self.remaining -= 1
        if self.remaining == 0:
            self.peer.reply(p.steps_response(self.rid, self.obs, self.rewards, self.terminated, self.truncated,
                                             self.infos, self.errors))


class _Slot:
    """Stands in for the peer while one entry of a `steps` request runs: its answer fills a column."""

    __slots__ = ("columns", "index", "sessions")

    def __init__(self, columns: _Columns, index: int, sessions: dict[str, Session]) -> None:
        self.columns, self.index, self.sessions = columns, index, sessions

    def reply(self, answer: dict) -> None:
        self.columns.fill(self.index, answer)


def _spaces(description: dict[str, Any]) -> dict[str, Any]:
    """The Gymnasium spaces clients build for this env (see openenv_gym.spaces), as data."""
    if description.get("action") == "tools":
        action = {"type": "ToolCallSpace", "tools": [t["name"] for t in description.get("tools", [])],
                  "accepts": "a tool call {name, arguments} or model text holding one"}
    else:
        action = {"type": "UnicodeText", "accepts": "any Unicode text"}
    return {"observation": {"type": "UnicodeText", "accepts": "any Unicode text"}, "action": action}


def _log_close_failure(task: asyncio.Task) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("closing an environment failed", exc_info=task.exception())

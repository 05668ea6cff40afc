"""The session core of one worker process: every session, and everything that happens to one. No wire format.

It owns the session table, creation and capacity, the episode rules (no auto-reset, the step limit), step
timeouts, reaping, batch steps and the thread pool of blocking environments. Front ends (the native
protocol, OpenEnv's, plain HTTP) turn their messages into calls of `reset`, `step`, `step_many` and
`close`, and the answers back into their own messages. Errors the caller can fix are raised at once as a
typed ProtocolError; what an environment does (a result, a refusal, an exception, a hang) arrives through
the request's reply callback, exactly once.

Cheap steps run inline (see runtime/eager.py); a step that has to wait runs in a task bounded by the step
timeout. An exception or a timeout inside one session ends that session with a typed error and touches
nothing else.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from functools import partial
from time import perf_counter
from typing import Any

from openenv_gym.adapters.environment import EnvironmentFactory
from openenv_gym.episode.groups import FinishedEpisode, group_of, without_group
from openenv_gym.episode.options import check_options, understood
from openenv_gym.episode.results import ResetResult, StepResult, invalid_action
from openenv_gym.episode.state import episode_id_of, no_episode, step_limit, timing_of
from openenv_gym.errors import (
    BadRequestError,
    CapacityError,
    EnvError,
    InvalidActionError,
    NoEpisodeError,
    ProtocolError,
    StepTimeoutError,
    UnknownSessionError,
)
from openenv_gym.protocol.tool_specs import as_tools
from openenv_gym.runtime.eager import EagerStarter
from openenv_gym.runtime.threads import ElasticPool
from openenv_gym.server.batch import StepColumns, step_many
from openenv_gym.server.blocking import OffLoop, is_blocking
from openenv_gym.server.config import Limits
from openenv_gym.server.groups import KeptGroups
from openenv_gym.server.metrics import ServerMetrics
from openenv_gym.server.sessions import Owner, Session, SessionCounter, new_session_id, short

log = logging.getLogger(__name__)

StepOutcome = StepResult | ProtocolError
ResetOutcome = ResetResult | ProtocolError
StepReply = Callable[[StepOutcome], None]
ResetReply = Callable[[str, ResetOutcome], None]  # (session id, outcome)


class SessionCore:
    def __init__(self, factory: EnvironmentFactory, limits: Limits, counter: SessionCounter,
                 threads: int, metrics: ServerMetrics | None = None) -> None:
        self.metrics = metrics or ServerMetrics()
        self.description = factory.describe()
        score_group = getattr(factory, "score_group", None)
        self.description["group_scoring"] = callable(score_group)
        self.reset_options = understood(self.description)  # None: the environment reads every option itself
        if self.description.get("tools"):  # one shape of tool in every kind (protocol/tool_specs.py)
            self.description["tools"] = as_tools(self.description["tools"])
        self.tools = self.description.get("tools") or None  # shown in every reset's info that shows none of its own
        self.default_limit: int | None = self.description.get("max_steps")
        self.loop = asyncio.get_running_loop()
        self.eager = EagerStarter(self.loop)  # environment code runs inline until it first waits (runtime/eager.py)
        self.executor = ElasticPool(threads, "openenv-env")  # a hung call cannot use it up (runtime/threads.py)
        self.loop.set_default_executor(self.executor)  # asyncio.to_thread (the ORS adapter's) uses the same threads
        if isinstance(factory, type) and is_blocking(factory):
            self.factory: Callable[[], Any] = lambda: OffLoop(factory(), self.executor)
        else:
            self.factory = factory
        self.limits = limits
        self.max_action_chars = limits.max_action_chars
        self.counter = counter
        self.sessions: dict[str, Session] = {}  # every session of this worker, for the reaper
        self.groups = KeptGroups(score_group if callable(score_group) else None, self.description.get("name", ""),
                                 limits.group_timeout, limits.step_timeout)

    # -- requests ------------------------------------------------------------------------------

    def reset(self, owner: Owner, session_id: str | None, seed: int | None, options: dict | None,
              reply: ResetReply) -> None:
        """Start an episode in a new session (session_id None) or in one of the owner's sessions."""
        self.metrics.resets += 1
        check_options(options, self.reset_options, self.description.get("name") or "this environment")
        limit = step_limit(options, self.default_limit)
        episode_id = episode_id_of(options)
        group = group_of(options)
        if group is not None:
            if self.groups.score_group is None:
                raise BadRequestError("this environment scores no groups (it has no score_group), so it keeps no "
                                      "group members: leave out the reset option 'group'")
            options = without_group(options)
        timing, options = timing_of(options)
        created = session_id is None
        session = self._open(owner) if created else self._idle_session(owner, session_id)
        session.live, session.group = False, None  # an episode left unfinished is no group member any more
        session.last_active, session.timing = self.loop.time(), timing
        if timing:
            session.began = perf_counter()
        done = partial(self._was_reset, session, limit, episode_id, group, created, reply)
        try:  # inline until the environment first waits
            finished, value = self.eager.start(session.env.reset(seed=seed, options=options))
        except Exception as exc:
            finished, value = True, exc
        if finished:
            done(value)
        else:
            self._watch(session, value, done)

    def step(self, owner: Owner, session_id: Any, action: Any, reply: StepReply) -> None:
        # the cheap test of "this step can run" (batch.py makes it too); refuse_step says why not
        session = owner.sessions.get(session_id) if type(session_id) is str else None
        if session is None or not session.live or session.task is not None or (
                type(action) is not str and type(action) is not dict):
            raise self.refuse_step(owner, session_id, action)
        self.metrics.steps += 1
        session.last_active = self.loop.time()
        if session.timing:  # (the clock is read for the episodes that asked for env_seconds only)
            session.began = perf_counter()
        if type(action) is str and len(action) > self.max_action_chars:
            reply(self.step_outcome(session, self.oversized(action)))
            return
        try:  # inline until the environment first waits
            finished, value = self.eager.start(session.env.step(action))
        except Exception as exc:
            finished, value = True, exc
        if finished:
            reply(self.step_outcome(session, value))
        else:
            self.watch_step(session, value, reply)

    def step_many(self, owner: Owner, session_ids: list, actions: list, reply: Callable[[StepColumns], None]) -> None:
        """Step many sessions at once; `reply(columns)` when every entry is answered (see batch.py)."""
        self.metrics.steps += len(session_ids)
        step_many(self, owner, session_ids, actions, reply)

    def refusal(self, owner: Owner, session_id: Any, action: Any) -> str | None:
        """Why the session's environment refuses `action` before any step (an OpenEnv environment's Action model
        does), or None. Front ends whose protocol refuses such actions rather than answering them with an
        invalid-action observation ask this first."""
        session = owner.sessions.get(session_id) if type(session_id) is str else None
        refuse = getattr(session.env, "refusal", None) if session is not None else None
        return None if refuse is None else refuse(action)

    def state(self, owner: Owner, session_id: Any) -> dict[str, Any]:
        """What is known of a session: its episode's id, whether it runs, its steps so far and its step limit,
        and the environment's own extras (Environment.extras), if it tells any."""
        session = self._owned(owner, session_id)
        state = session.state(session.id)
        tell = getattr(session.env, "extras", None)
        try:
            extras = tell() if tell is not None and session.episode_id is not None else None
        except Exception as exc:  # the environment's own code: its failure is reported, the session goes on
            log.warning("extras() of session %s failed", short(session.id), exc_info=True)
            extras = {"error": f"{type(exc).__name__}: {exc}"}
        if extras:
            state["extras"] = extras
        return state

    def close(self, owner: Owner, session_id: Any) -> None:
        self.end(self._owned(owner, session_id))

    # -- sessions ------------------------------------------------------------------------------

    def _open(self, owner: Owner) -> Session:
        if not self.counter.try_acquire():
            raise CapacityError(
                f"the server holds its maximum of {self.limits.max_sessions} sessions; close finished "
                "sessions, wait, or use another server")
        try:
            env = self.factory()
        except CapacityError:  # the environment's own limit (one session per process, say)
            self.counter.release()
            raise
        except Exception as exc:
            self.counter.release()
            log.exception("creating an environment failed")
            raise EnvError(f"creating the environment failed: {type(exc).__name__}: {exc}") from None
        session = Session(new_session_id(), env, owner, self.loop.time())
        owner.sessions[session.id] = session
        self.sessions[session.id] = session
        return session

    def _owned(self, owner: Owner, session_id: Any) -> Session:
        if type(session_id) is not str:
            raise BadRequestError(f"field 'session' must be a string session id, got {type(session_id).__name__}")
        session = owner.sessions.get(session_id)
        if session is None:
            raise UnknownSessionError(
                f"no session {short(session_id)} on this connection: it was closed, reaped or ended, "
                "or belongs to another connection; reset without a session id to start a new one")
        return session

    def _idle_session(self, owner: Owner, session_id: Any) -> Session:
        session = self._owned(owner, session_id)
        if session.task is not None:
            raise BadRequestError(f"session {short(session_id)} is still answering an earlier request; "
                                  "wait for that answer before sending the next")
        return session

    def oversized(self, action: str) -> StepResult:
        """The answer to a text action over the limit: an invalid action, before any environment code reads it."""
        return invalid_action(f"the action is {len(action)} characters; this server takes at most "
                              f"{self.max_action_chars} (openenv-gym serve --max-action-chars)")

    def refuse_step(self, owner: Owner, session_id: Any, action: Any) -> ProtocolError:
        """The typed error that explains why this step cannot run."""
        if session_id is None:
            return NoEpisodeError("step before reset: this request names no session; "
                                  "call reset first, it creates the session")
        try:
            session = self._idle_session(owner, session_id)
        except ProtocolError as exc:
            return exc
        if type(action) is not str and type(action) is not dict:
            return InvalidActionError(f"an action is model text (a string) or a tool call object, got "
                                      f"{type(action).__name__}")
        return no_episode(f"session {short(session.id)}")

    def end(self, session: Session) -> None:
        """Forget a session and close its environment. Safe to call twice."""
        if self.sessions.pop(session.id, None) is None:
            return
        session.owner.sessions.pop(session.id, None)
        session.live = False
        self.counter.release()
        if session.task is not None:
            session.task.cancel()  # its reply says the session ended
            session.task = None
        try:
            done, task = self.eager.start(session.env.close())
            if not done:
                task.add_done_callback(_log_close_failure)
        except Exception:
            log.exception("closing an environment failed")

    def drop(self, owner: Owner) -> None:
        """The owner (a connection) went away: end all its sessions, and forget its groups."""
        for session in list(owner.sessions.values()):
            self.end(session)
        self.groups.forget_owner(owner)

    def reap_idle(self, now: float) -> int:
        """End sessions unused for longer than the idle timeout; return how many."""
        cutoff = now - self.limits.idle_timeout
        idle = [s for s in self.sessions.values() if s.last_active < cutoff and s.task is None]
        for session in idle:
            self.end(session)
        return len(idle)

    def shutdown(self) -> None:
        """End every session. The threads stay for what closes after (a factory's aclose): stop_threads ends them."""
        self.groups.shutdown()
        for session in list(self.sessions.values()):
            self.end(session)
        self.eager.close()

    def stop_threads(self) -> None:
        self.executor.shutdown(wait=False, cancel_futures=True)

    # -- running environment code --------------------------------------------------------------

    def watch_step(self, session: Session, task: asyncio.Task, reply: StepReply) -> None:
        """A step that waited goes on in `task`: its outcome to `reply` when it ends (or the step timeout ends it)."""
        self._watch(session, task, partial(self._deliver_step, session, reply))

    def _watch(self, session: Session, task: asyncio.Task, done: Callable[[Any], None]) -> None:
        """The session is busy with `task` until it ends, or the step timeout ends the session; then `done`."""
        session.task = task
        timer = self.loop.call_later(self.limits.step_timeout, self._time_out, session, task)
        task.add_done_callback(partial(self._finished, timer, session, done))

    def _time_out(self, session: Session, task: asyncio.Task) -> None:
        session.timed_out = True
        task.cancel()

    def _finished(self, timer: asyncio.TimerHandle, session: Session, done: Callable[[Any], None],
                  task: asyncio.Task) -> None:
        timer.cancel()
        if task.cancelled():
            if session.timed_out:
                self.end(session)
                done(StepTimeoutError(
                    f"the environment took longer than the step timeout ({self.limits.step_timeout:g} s); "
                    "its session is ended, reset without a session id to start a new one"))
            else:
                done(UnknownSessionError(f"session {short(session.id)} ended (closed, reaped or disconnected) "
                                         "while this request ran"))
            return
        session.task = None
        exc = task.exception()
        done(exc if exc is not None else task.result())

    def _failed(self, session: Session, exc: BaseException) -> EnvError:
        """The error of an environment that raised (or returned what it must not): its session ends, unless its
        owner's protocol keeps it (then its episode goes on, uncounted)."""
        log.error("environment error in session %s", short(session.id), exc_info=exc)
        what = f"the environment raised {type(exc).__name__}: {exc}"
        if not session.owner.failures_end_sessions:
            return EnvError(f"{what}; the session and its episode go on")
        return self._ended(session, what)

    def _ended(self, session: Session, what: str) -> EnvError:
        """End a session whose environment failed; the error that says so."""
        self.end(session)
        return EnvError(f"{what}; its session is ended, reset without a session id to start a new one")

    def end_unsendable(self, owner: Owner, session_id: Any, problem: str) -> EnvError:
        """A front end could not send a session's result (`problem`): the session ends, as for any environment
        failure, and this is the error to answer with."""
        session = owner.sessions.get(session_id) if type(session_id) is str else None
        log.error("session %s: the environment returned a value that cannot be sent: %s", short(str(session_id)),
                  problem)
        what = f"the environment returned a value JSON cannot carry ({problem}); keep obs and info to JSON types"
        if session is None:
            return EnvError(what)
        return self._ended(session, what)

    def step_outcome(self, session: Session, value: Any) -> StepOutcome:
        """A step's outcome: the result, checked and counted against the step limit; or the error."""
        if type(value) is StepResult and type(value.obs) is str and type(value.info) is dict:
            reward = value.reward
            if type(reward) is not float:
                try:
                    value.reward = float(reward)
                except (TypeError, ValueError):
                    return self._failed(session, TypeError(f"reward must be a number, got {reward!r:.100}"))
            value.terminated = terminated = bool(value.terminated)
            value.truncated = session.count(terminated, bool(value.truncated))
            if session.timing:
                session.timed(value.info)
            if session.group is not None:
                self.member_stepped(session, value)
            return value
        if isinstance(value, ProtocolError):  # the environment refused with a typed error: the session stays
            return value
        if isinstance(value, BaseException):
            return self._failed(session, value)
        return self._failed(session, TypeError(
            f"step must return a StepResult(obs: str, ..., info: dict), got {value!r:.200}"))

    def member_stepped(self, session: Session, result: StepResult) -> None:
        """A group member's step was counted: add its reward; keep its episode if that ended."""
        session.returned += result.reward
        if session.live:
            return
        group, member = session.group  # type: ignore[misc]
        session.group = None
        try:
            record = session.env.episode_record()
        except Exception as exc:  # the environment's own code: the group is scored without this member's record
            log.error("episode_record() of session %s failed", short(session.id), exc_info=exc)
            record = None
        self.groups.keep(session.owner, group, FinishedEpisode(
            member, session.episode_id or "", session.returned, session.steps, result.info, result.truncated, record))

    def _deliver_step(self, session: Session, deliver: StepReply, value: Any) -> None:
        deliver(self.step_outcome(session, value))

    def _was_reset(self, session: Session, limit: int | None, episode_id: str, group: tuple[str, int] | None,
                   created: bool, reply: ResetReply, value: Any) -> None:
        if type(value) is ResetResult and type(value.obs) is str and type(value.info) is dict:
            if "tools" in value.info:  # the task's own, in one shape (protocol/tool_specs.py) whatever the kind's
                value.info["tools"] = as_tools(value.info["tools"])
            elif self.tools is not None:
                value.info["tools"] = self.tools
            session.begin(limit, episode_id)
            if session.timing:
                session.seconds = perf_counter() - session.began
            session.group, session.returned = group, 0.0
        elif isinstance(value, ProtocolError):  # refused: a session whose first reset failed was never handed out
            if created:
                self.end(session)
        else:
            value = self._failed(session, value if isinstance(value, BaseException) else TypeError(
                f"reset must return a ResetResult(obs: str, info: dict), got {value!r:.200}"))
            if created:  # a session whose first reset failed is never handed out
                self.end(session)
        reply(session.id, value)


def _log_close_failure(task: asyncio.Task) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("closing an environment failed", exc_info=task.exception())

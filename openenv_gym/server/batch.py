"""Many sessions stepped (or reset) at once (the vector client's lock-step), answered in columns.

Each entry runs exactly like a single step: the same checks, errors, step limit and timeout. The entries are
awaited one after another inside one driver coroutine, so a step that completes without waiting (most do)
costs no StopIteration: about 230 ns of the 500 ns an echo step costs that way. A step that does wait is left
to a task of its own (the driver was started eagerly, runtime/eager.py: the step already ran as that task),
bounded by the step timeout, and a new driver goes on with the entries after it. The entries of one driver share
its context: what one step's code sets in a context variable before it returns, the next of the batch sees.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from time import perf_counter
from typing import TYPE_CHECKING, Any

from openenv_gym.episode.results import StepResult
from openenv_gym.errors import ProtocolError

if TYPE_CHECKING:
    from openenv_gym.server.core import SessionCore, StepOutcome
    from openenv_gym.server.sessions import Owner, Session


class StepColumns:
    """The answers to a batch of steps, filled entry by entry; `reply(self)` once the last entry is in."""

    __slots__ = ("errors", "infos", "obs", "remaining", "reply", "rewards", "terminated", "truncated")

    def __init__(self, size: int, reply: Callable[[StepColumns], None]) -> None:
        self.reply, self.remaining = reply, size
        self.obs: list[str] = [""] * size
        self.rewards: list[float] = [0.0] * size
        self.terminated: list[bool] = [False] * size
        self.truncated: list[bool] = [False] * size
        self.infos: list[dict] = [{}] * size
        self.errors: list[ProtocolError | None] | None = None  # None while no entry failed

    def put(self, index: int, outcome: StepOutcome) -> None:
        if type(outcome) is StepResult:
            self.obs[index], self.rewards[index], self.infos[index] = outcome.obs, outcome.reward, outcome.info
            self.terminated[index], self.truncated[index] = outcome.terminated, outcome.truncated
        else:
            if self.errors is None:
                self.errors = [None] * len(self.obs)
            self.errors[index] = outcome  # type: ignore[assignment]
        self.settle(1)

    def settle(self, count: int) -> None:
        """`count` more entries are answered (written directly into the columns, or by `put`)."""
        self.remaining -= count
        if self.remaining == 0:
            self.reply(self)


class ResetColumns:
    """The answers to a batch of resets (`resets`): each entry's session, first observation and info, filled as each
    reset finishes (inline, or later for a reset that waits); `reply(self)` once the last entry is in."""

    __slots__ = ("errors", "infos", "obs", "remaining", "reply", "sessions")

    def __init__(self, size: int, reply: Callable[[ResetColumns], None]) -> None:
        self.reply, self.remaining = reply, size
        self.sessions: list[str | None] = [None] * size  # null where the entry failed
        self.obs: list[str] = [""] * size
        self.infos: list[dict] = [{}] * size
        self.errors: list[ProtocolError | None] | None = None  # None while no entry failed

    def put(self, index: int, session_id: str | None, outcome: Any) -> None:
        """The core's reset reply for entry `index`: a ResetResult, or the ProtocolError it failed with."""
        if isinstance(outcome, ProtocolError):
            if self.errors is None:
                self.errors = [None] * len(self.obs)
            self.errors[index] = outcome
        else:
            self.sessions[index], self.obs[index], self.infos[index] = session_id, outcome.obs, outcome.info
        self.remaining -= 1
        if self.remaining == 0:
            self.reply(self)


class _Driver:
    """Where a driver is: the entry it awaits, and whether that entry was left to a task of its own."""

    __slots__ = ("detached", "index", "session")

    def __init__(self) -> None:
        self.detached = False
        self.index = 0
        self.session: Session | None = None


def step_many(core: SessionCore, owner: Owner, session_ids: list, actions: list,
              reply: Callable[[StepColumns], None]) -> None:
    columns = StepColumns(len(session_ids), reply)
    start = 0
    while start < len(session_ids):
        driver = _Driver()
        finished, task = core.eager.start(_drive(core, owner, session_ids, actions, columns, start, driver))
        if finished:
            return
        driver.detached = True  # entry driver.index waits: it finishes alone, in a task; the next driver goes on
        assert driver.session is not None
        core.watch_step(driver.session, task, partial(columns.put, driver.index))
        start = driver.index + 1


async def _drive(core: SessionCore, owner: Owner, session_ids: list, actions: list, columns: StepColumns,
                 start: int, driver: _Driver) -> Any:
    """Step entries start.. in order; a well-formed result is written into the columns here, anything else goes
    through the core's general path. Detached while awaiting an entry, it returns that entry's result instead."""
    obs, rewards, terminated, truncated, infos = (columns.obs, columns.rewards, columns.terminated,
                                                  columns.truncated, columns.infos)
    put, table, now, written = columns.put, owner.sessions, core.loop.time(), 0
    try:
        for index in range(start, len(session_ids)):
            session_id, action = session_ids[index], actions[index]
            session = table.get(session_id) if type(session_id) is str else None
            if session is None or not session.live or session.task is not None or (
                    type(action) is not str and type(action) is not dict):
                put(index, core.refuse_step(owner, session_id, action))
                continue
            session.last_active = now
            if session.timing:
                session.began = perf_counter()
            if type(action) is str and len(action) > core.max_action_chars:
                put(index, core.step_outcome(session, core.oversized(action)))
                continue
            driver.index, driver.session = index, session
            try:
                result = await session.env.step(action)
            except Exception as exc:
                if driver.detached:
                    raise
                put(index, core.step_outcome(session, exc))
                continue
            if driver.detached:
                return result
            # a well-formed result (`x.__class__ is T`: the cheapest exact type check, this is the hot path)
            if (result.__class__ is StepResult and result.obs.__class__ is str and result.info.__class__ is dict
                    and result.reward.__class__ is float and result.terminated.__class__ is bool
                    and result.truncated.__class__ is bool):
                obs[index], rewards[index], infos[index] = result.obs, result.reward, result.info
                terminated[index] = result.terminated
                truncated[index] = limit_hit = session.count(result.terminated, result.truncated)
                if session.timing:
                    session.timed(result.info)
                if session.group is not None:
                    result.truncated = limit_hit
                    core.member_stepped(session, result)
                written += 1
            else:
                put(index, core.step_outcome(session, result))
    finally:
        if written:
            columns.settle(written)
    return None

"""The session core in process: no sockets and no wire format, only calls in and replies out."""

import asyncio
import threading
import time

import pytest
from conftest import env_path, run

from openenv_gym import Environment, ResetResult, StepResult, errors
from openenv_gym.adapters import load_factory
from openenv_gym.manifests import find_manifest
from openenv_gym.server.config import Limits
from openenv_gym.server.core import SessionCore
from openenv_gym.server.sessions import Owner, SessionCounter


class Scripted(Environment):
    """Does what its action says: "raise", "refuse", "wait", "hang", "end", "garbage", "reward:x"; else echoes."""

    name = "scripted"
    max_steps = 4
    closed = 0

    async def reset(self, *, seed=None, options=None):
        if (options or {}).get("refuse"):
            raise errors.BadRequestError("refused on purpose")
        return ResetResult("ready", {"seed": seed})

    async def step(self, action):
        if action == "raise":
            raise RuntimeError("boom")
        if action == "refuse":
            raise errors.BadRequestError("not this one")
        if action == "wait":
            await asyncio.sleep(0.05)
            return StepResult("waited")
        if action == "hang":
            await asyncio.sleep(3600)
        if action == "end":
            return StepResult("bye", 1.0, terminated=True)
        if action == "garbage":
            return "not a StepResult"
        if isinstance(action, str) and action.startswith("reward:"):
            return StepResult("paid", action.removeprefix("reward:"))
        return StepResult(action if isinstance(action, str) else "a call")

    async def close(self):
        Scripted.closed += 1


class Threaded(Environment):
    """Steps through asyncio.to_thread, as the ORS adapter calls plain-def methods of ORS classes."""

    async def reset(self, *, seed=None, options=None):
        return ResetResult("ready")

    async def step(self, action):
        return StepResult(await asyncio.to_thread(lambda: threading.current_thread().name))


def calls_of(factory=Scripted, max_sessions=100, step_timeout=1.0) -> "Calls":
    """A core of `factory` (run in the running loop) and an owner to call it as."""
    limits = Limits(max_sessions=max_sessions, step_timeout=step_timeout, idle_timeout=0.2)
    return Calls(SessionCore(factory, limits, SessionCounter(max_sessions), threads=2), Owner())


class Calls:
    """Awaitable wrappers of the core's callback API."""

    def __init__(self, core: SessionCore, owner: Owner) -> None:
        self.core, self.owner = core, owner

    async def reset(self, session=None, seed=None, options=None):
        done = asyncio.get_running_loop().create_future()
        self.core.reset(self.owner, session, seed, options, lambda sid, outcome: done.set_result((sid, outcome)))
        return await done

    async def step(self, session, action):
        done = asyncio.get_running_loop().create_future()
        self.core.step(self.owner, session, action, done.set_result)
        return await done

    async def steps(self, sessions, actions):
        done = asyncio.get_running_loop().create_future()
        self.core.step_many(self.owner, sessions, actions, done.set_result)
        return await done

    async def session(self, **options):
        sid, outcome = await self.reset(options=options or None)
        assert isinstance(outcome, ResetResult), outcome
        return sid


def test_sessions_are_created_by_reset_and_bound_to_their_owner():
    async def main():
        mine = calls_of()
        core, theirs = mine.core, Calls(mine.core, Owner())
        sid, outcome = await mine.reset(seed=3)
        assert outcome.obs == "ready" and outcome.info == {"seed": 3} and len(sid) >= 22
        assert (await mine.step(sid, "hi")).obs == "hi"
        with pytest.raises(errors.UnknownSessionError):  # another owner cannot name it
            core.step(theirs.owner, sid, "x", lambda outcome: None)
        with pytest.raises(errors.NoEpisodeError, match="step before reset"):
            core.step(mine.owner, None, "x", lambda outcome: None)
        with pytest.raises(errors.BadRequestError, match="must be a string"):
            core.step(mine.owner, 5, "x", lambda outcome: None)
        with pytest.raises(errors.InvalidActionError):
            core.step(mine.owner, sid, 42, lambda outcome: None)
        state = core.state(mine.owner, sid)
        assert state.pop("episode_id")  # a fresh id when the reset names none
        assert state == {"session": sid, "running": True, "steps": 1, "max_steps": 4}

    run(main())


def test_the_step_limit_truncates_and_there_is_no_auto_reset():
    async def main():
        calls = calls_of()
        core = calls.core
        sid = await calls.session()
        results = [await calls.step(sid, "x") for _ in range(4)]  # the env's own limit: 4
        assert [r.truncated for r in results] == [False, False, False, True]
        with pytest.raises(errors.NoEpisodeError, match="no episode is running"):
            core.step(calls.owner, sid, "x", lambda outcome: None)
        short = await calls.session(max_steps=2)  # the reset option overrides it
        assert [(await calls.step(short, "x")).truncated for _ in range(2)] == [False, True]
        ended = await calls.session()
        assert (await calls.step(ended, "end")).terminated and not core.state(calls.owner, ended)["running"]
        with pytest.raises(errors.BadRequestError, match="max_steps must be a positive integer"):
            core.reset(calls.owner, None, None, {"max_steps": 0}, lambda sid, outcome: None)

    run(main())


def test_an_exception_ends_only_its_session_and_a_refusal_ends_none():
    async def main():
        calls = calls_of()
        core = calls.core
        bad, good = await calls.session(), await calls.session()
        closed = Scripted.closed
        outcome = await calls.step(bad, "raise")
        assert isinstance(outcome, errors.EnvError) and "RuntimeError: boom" in str(outcome)
        assert bad not in core.sessions and Scripted.closed == closed + 1 and core.counter.total() == 1
        assert isinstance(await calls.step(good, "refuse"), errors.BadRequestError)
        assert (await calls.step(good, "still")).obs == "still"  # refused, not ended
        for garbage in ("garbage", "reward:lots"):
            session = await calls.session()
            assert isinstance(await calls.step(session, garbage), errors.EnvError)
        assert (await calls.step(await calls.session(), "reward:0.5")).reward == 0.5  # numbers are made floats
        sid, outcome = await calls.reset(options={"refuse": True})
        assert isinstance(outcome, errors.BadRequestError) and sid not in core.sessions  # never handed out

    run(main())


def test_waiting_steps_run_in_tasks_and_hung_ones_time_out():
    async def main():
        calls = calls_of(step_timeout=0.3)
        core = calls.core
        waiting, hung, other = await calls.session(), await calls.session(), await calls.session()
        pending = asyncio.ensure_future(calls.step(waiting, "wait"))
        with pytest.raises(errors.BadRequestError, match="still answering"):  # one request at a time
            await asyncio.sleep(0) or core.step(calls.owner, waiting, "x", lambda outcome: None)
        assert (await pending).obs == "waited"
        started = time.monotonic()
        hanging = asyncio.ensure_future(calls.step(hung, "hang"))
        assert (await calls.step(other, "meanwhile")).obs == "meanwhile"
        outcome = await hanging
        assert isinstance(outcome, errors.StepTimeoutError) and 0.25 < time.monotonic() - started < 2
        assert hung not in core.sessions

    run(main())


def test_steps_in_columns_one_entry_at_a_time_each_as_a_step():
    async def main():
        calls = calls_of(step_timeout=0.3)
        core = calls.core
        a, b, c, d, e = [await calls.session() for _ in range(5)]
        columns = await calls.steps([a, "nope", b, None, c, [1], d, e],
                                    ["x", "y", 42, "z", "raise", "w", "wait", "hang"])
        assert columns.obs[0] == "x" and columns.obs[6] == "waited"
        assert [type(error).__name__ if error else None for error in columns.errors] == [
            None, "UnknownSessionError", "InvalidActionError", "NoEpisodeError", "EnvError", "BadRequestError",
            None, "StepTimeoutError"]
        columns = await calls.steps([a, d], ["again", "end"])
        assert columns.errors is None and columns.obs == ["again", "bye"] and columns.terminated == [False, True]
        assert core.state(calls.owner, a)["steps"] == 2

    run(main())


def test_a_waiting_entry_does_not_hold_back_the_others():
    async def main():
        calls = calls_of()
        core = calls.core
        sessions = [await calls.session() for _ in range(3)]
        answered = []
        core.step_many(calls.owner, sessions, ["wait", "b", "c"], answered.append)
        assert answered == [] and core.sessions[sessions[0]].busy and not core.sessions[sessions[2]].busy
        assert core.state(calls.owner, sessions[2])["steps"] == 1  # stepped inline, before the waiting one ended
        await asyncio.sleep(0.2)
        (columns,) = answered
        assert columns.obs == ["waited", "b", "c"]

    run(main())


def test_closing_a_busy_session_still_answers_its_request():
    async def main():
        calls = calls_of()
        core = calls.core
        sid = await calls.session()
        pending = asyncio.ensure_future(calls.step(sid, "hang"))
        await asyncio.sleep(0.01)
        core.close(calls.owner, sid)
        assert isinstance(await pending, errors.UnknownSessionError)
        with pytest.raises(errors.UnknownSessionError):
            core.close(calls.owner, sid)

    run(main())


def test_capacity_idle_reaping_and_a_dropped_owner():
    async def main():
        calls = calls_of(max_sessions=2)
        core = calls.core
        first, second = await calls.session(), await calls.session()
        with pytest.raises(errors.CapacityError, match="maximum of 2 sessions"):
            core.reset(calls.owner, None, None, None, lambda sid, outcome: None)
        await asyncio.sleep(0.25)
        await calls.step(second, "x")  # used: not idle
        assert core.reap_idle(core.loop.time()) == 1 and list(core.sessions) == [second]
        core.drop(calls.owner)
        assert core.sessions == {} and core.counter.total() == 0 and first not in calls.owner.sessions

    run(main())


def test_blocking_environments_run_in_threads():
    async def main():
        calls = calls_of(load_factory(find_manifest(env_path("blocking"))))
        core = calls.core
        slow, fast = await calls.session(), await calls.session()
        sleeping = asyncio.ensure_future(calls.step(slow, "0.2"))
        quick = 0
        while not sleeping.done():
            assert (await calls.step(fast, "0")).obs == "slept 0"
            quick += 1
        assert (await sleeping).obs == "slept 0.2" and quick > 3  # the loop kept serving meanwhile
        core.shutdown()

    run(main())


def test_to_thread_calls_use_the_cores_threads():
    """--threads bounds the threads of plain-def methods and of asyncio.to_thread calls alike."""

    async def main():
        calls = calls_of(Threaded)
        assert (await calls.step(await calls.session(), "x")).obs.startswith("openenv-env")

    run(main())

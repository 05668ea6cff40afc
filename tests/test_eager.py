"""Coroutines started eagerly (runtime/eager.py) behave as the tasks Python 3.12's eager task factory makes: the
first part already runs as the task that goes on with it, in a context of its own, and whoever started it is never
cancelled for it."""

import asyncio
import contextvars

import anyio
import pytest
from conftest import run

from openenv_gym.runtime.eager import EagerStarter

where = contextvars.ContextVar("where", default="outside")


async def instant(value):
    return value


async def waits_inside(scope_kind: str) -> str:
    """Opens a task-bound scope before its first wait and leaves it after: asyncio.timeout, a TaskGroup or an
    anyio cancel scope (what every httpx request opens)."""
    if scope_kind == "timeout":
        async with asyncio.timeout(5):
            await asyncio.sleep(0.01)
    elif scope_kind == "taskgroup":
        async with asyncio.TaskGroup() as group:
            group.create_task(asyncio.sleep(0.01))
    else:
        with anyio.move_on_after(5):
            await anyio.sleep(0.01)
    return scope_kind


def test_a_coroutine_that_never_waits_is_done_at_once_without_a_task():
    async def main():
        eager = EagerStarter(asyncio.get_running_loop())
        tasks = len(asyncio.all_tasks())
        assert eager.start(instant(7)) == (True, 7)
        assert eager.start(instant(8)) == (True, 8)
        assert len(asyncio.all_tasks()) <= tasks + 1  # at most the one parked spare, whatever the count of calls
        with pytest.raises(ValueError, match="early"):
            eager.start(_raises_at_once())
        eager.close()

    run(main())


async def _raises_at_once():
    raise ValueError("early")


@pytest.mark.parametrize("scope_kind", ["timeout", "taskgroup", "anyio"])
def test_scopes_opened_before_the_first_wait_belong_to_the_task_that_goes_on(scope_kind):
    async def main():
        eager = EagerStarter(asyncio.get_running_loop())
        done, task = eager.start(waits_inside(scope_kind))
        assert not done and isinstance(task, asyncio.Task)
        assert await task == scope_kind
        eager.close()

    run(main())


def test_a_timeout_that_fires_cancels_the_coroutine_never_its_starter():
    async def expires() -> str:
        try:
            async with asyncio.timeout(0.05):
                await asyncio.sleep(5)
        except TimeoutError:
            return "timed out"
        return "not timed out"

    async def main():
        eager = EagerStarter(asyncio.get_running_loop())
        done, task = eager.start(expires())
        await asyncio.sleep(0.2)  # the starter waits through the deadline: it must not be the one cancelled
        assert await task == "timed out"
        eager.close()

    run(main())


def test_the_first_part_sees_the_task_it_goes_on_in_and_a_context_of_its_own():
    async def remembers(name: str) -> tuple:
        seen = where.get()
        where.set(name)
        before = asyncio.current_task()
        await asyncio.sleep(0)
        return seen, where.get(), before is asyncio.current_task()

    async def sets_only(name: str) -> str:
        where.set(name)
        return name

    async def main():
        eager = EagerStarter(asyncio.get_running_loop())
        where.set("caller")
        assert eager.start(sets_only("first")) == (True, "first")
        done, task = eager.start(remembers("second"))
        assert not done
        # what a coroutine set stays its own: not the caller's, not the next one's
        assert where.get() == "caller" and await task == ("caller", "second", True)
        eager.close()

    run(main())


async def waits_to_be_cancelled(cancel_itself: bool = False) -> str:
    if cancel_itself:
        asyncio.current_task().cancel()
    try:
        await asyncio.sleep(5)
    except asyncio.CancelledError:
        return "cancelled where it waited"
    return "not cancelled"


def test_a_first_part_that_cancels_its_own_task_is_cancelled_where_it_waits():
    async def main():
        eager = EagerStarter(asyncio.get_running_loop())
        done, task = eager.start(waits_to_be_cancelled(cancel_itself=True))
        assert not done and await task == "cancelled where it waited"
        assert eager.start(instant(1)) == (True, 1)  # the next one is not touched by it
        done, task = eager.start(waits_inside("timeout"))
        assert await task == "timeout"
        eager.close()

    run(main())


@pytest.mark.parametrize("parked", [False, True], ids=["before-its-task-ran", "while-its-task-was-parked"])
def test_a_cancellation_before_the_task_took_over_reaches_the_coroutine_where_it_waits(parked):
    async def main():
        eager = EagerStarter(asyncio.get_running_loop())
        if parked:
            await asyncio.sleep(0)  # the spare's first step runs: it parks until a coroutine is handed over
        done, task = eager.start(waits_to_be_cancelled())
        task.cancel()  # at once, before the task has resumed the coroutine
        assert not done and await task == "cancelled where it waited"
        eager.close()

    run(main())


def test_a_first_part_that_yields_bare_goes_on_in_its_task():
    async def yields_once() -> str:
        await asyncio.sleep(0)
        return "after a bare yield"

    async def main():
        eager = EagerStarter(asyncio.get_running_loop())
        done, task = eager.start(yields_once())
        assert not done and await task == "after a bare yield"
        eager.close()

    run(main())


def test_starts_inside_a_first_part_or_after_close_run_at_once_too_and_nothing_is_left_pending():
    async def main():
        eager = EagerStarter(asyncio.get_running_loop())
        inner = []

        async def outer() -> str:
            inner.append(eager.start(waits_inside("timeout")))
            inner.append(eager.start(instant("inner, at once")))
            await asyncio.sleep(0.01)
            return "outer"

        done, task = eager.start(outer())
        [(waited, inner_task), finished] = inner
        assert not done and not waited and task is not inner_task and finished == (True, "inner, at once")
        assert await task == "outer" and await inner_task == "timeout"
        eager.close()
        assert eager.start(instant(3)) == (True, 3)
        done, task = eager.start(waits_inside("anyio"))
        assert not done and await task == "anyio"
        await asyncio.sleep(0)
        assert not [t for t in asyncio.all_tasks() if t is not asyncio.current_task() and not t.done()]

    run(main())

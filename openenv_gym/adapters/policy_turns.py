"""A program that asks a model, run as a task, its model requests parked as turns that a session answers.

Verifiers' rollouts ask through a client object, agent programs through the model endpoint; either way the
program keeps its own loop, and the session only supplies the assistant's messages:

    turns = PolicyTurns(lambda ask: program(ask))   # program awaits ask(request) for each model call
    turn = await turns.next_turn()                  # Turn(request=...): the model is asked
    turn = await turns.answer(message)              # ... or Turn(output=...): the program ended with this result
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

Ask = Callable[[Any], Awaitable[Any]]  # a model request -> the assistant message that answers it


class TurnRefused(Exception):
    """A model request that cannot be parked (another is waiting, or the episode is over)."""


@dataclass(slots=True)
class Turn:
    request: Any = None  # what the program asks the model, while it runs
    output: Any = None  # what the program returned, once it ended

    @property
    def done(self) -> bool:
        return self.request is None


class PolicyTurns:
    """One program run as a task; each of its model requests becomes a turn, answered one step at a time."""

    def __init__(self, run: Callable[[Ask], Awaitable[Any]]) -> None:
        loop = asyncio.get_running_loop()
        self._turn: asyncio.Future[Turn] = loop.create_future()
        self._reply: asyncio.Future[Any] | None = None
        self._waiting = False  # a request awaits the reply now
        self.task = loop.create_task(run(self.ask))
        self.task.add_done_callback(self._ended)

    async def ask(self, request: Any) -> Any:
        """Called by the program, on its task: publish the request, wait for the answer."""
        if self._reply is not None:
            if self._waiting:
                raise TurnRefused("a model request is already waiting for its answer: send one request at a time")
            reply = self._reply  # a retry of a request given up while it waited: it takes that request's answer
        elif self._turn.done():
            raise TurnRefused("the episode is over: no more model requests are answered")
        else:
            self._reply = reply = asyncio.get_running_loop().create_future()
            self._turn.set_result(Turn(request=request))
        self._waiting = True
        try:
            return await reply
        finally:
            self._waiting = False

    def _ended(self, _: asyncio.Task) -> None:
        if not self._turn.done():
            self._turn.set_result(Turn())

    async def next_turn(self) -> Turn:
        """The next request, or the program's result once it ended (its exception, if it raised one)."""
        turn = await asyncio.shield(self._turn)  # a waiter given up (a turn timeout) leaves the turn to come
        if not turn.done:
            return turn
        return Turn(output=self.task.result())

    async def answer(self, message: Any) -> Turn:
        """Give the waiting model request its answer; return the next turn."""
        assert self._reply is not None, "answer() before a model request"
        self._turn = asyncio.get_running_loop().create_future()
        reply, self._reply = self._reply, None
        if self.task.done():  # it ended while the policy thought
            self._turn.set_result(Turn())
        elif not reply.done():
            reply.set_result(message)
        return await self.next_turn()

    async def cancel(self) -> None:
        """End a program that is still running (its cleanup runs)."""
        if self.task.done():
            return
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            try:
                await self.task
            except Exception:  # a failing cleanup must not fail the close that ended the episode
                log.warning("a program failed while being cancelled", exc_info=True)

"""The traces of a run: one per agent run of the episode (a seat), as Verifiers' own server gives them.

An env whose episode runs several agents (a Verifiers v1 env's seats: code_golf's players, kuhn_poker's two,
proposer_solver's proposer and solvers) says in each request's info which trace asks (`"trace"`: its id, agent and
standing) and, for a seat pinned to a model of its own, that model (`"model"`). Each such trace is an interaction
of the run's agent here, opened at its first request, calling the model its seat named; the episode's last info
says how each ended (`"traces"`: rewards, metrics, stop), and they close in its order, the episode's. An env of one
conversation is one seat, ended as the episode ended.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

from openenv_gym.errors import EnvError

log = logging.getLogger(__name__)

MAX_SEATS = 256  # traces one run may open (each an interaction held to the episode's end)


@dataclass
class Seat:
    context: AbstractAsyncContextManager[Any]
    interaction: Any
    opening: bool = True  # its first turn is still to come

    @property
    def trace(self) -> Any:
        return self.interaction.trace


class Seats:
    def __init__(self, agent: Any, task: Any) -> None:
        self.agent, self.task = agent, task
        self.held: dict[str, Seat] = {}

    async def of(self, info: dict[str, Any]) -> Seat:
        """The seat whose trace the request of `info` is of: opened at its first request."""
        named = info.get("trace") if isinstance(info.get("trace"), dict) else {}
        key = str(named.get("id", ""))
        seat = self.held.get(key)
        if seat is not None:
            return seat
        if len(self.held) >= MAX_SEATS:
            raise EnvError(f"the episode ran more than {MAX_SEATS} agents (traces); a run holds at most that many")
        context = _pinned(self.agent, info.get("model")).interaction(self.task)
        seat = self.held[key] = Seat(context, await context.__aenter__())
        standing = seat.trace.agent
        if standing is not None:  # (the env's seat, not this run's one agent: prime-rl trains on trainable ones)
            if isinstance(named.get("agent"), str):
                standing.name = named["agent"]
            if isinstance(named.get("trainable"), bool):
                standing.trainable = named["trainable"]
        return seat

    async def close(self, endings: dict[str, dict[str, Any]], truncated: bool) -> list[tuple[Any, dict[str, Any]]]:
        """Each seat's trace stopped as the env says it ended, closed in the episode's order; (trace, its ending)
        for those the env said how they ended."""
        if len(endings) == 1 and len(self.held) == 1 and not endings.keys() & self.held.keys():
            endings = {next(iter(self.held)): next(iter(endings.values()))}  # (one trace each side: the same)
        order = [*(key for key in endings if key in self.held), *(key for key in self.held if key not in endings)]
        ended = []
        for key in order:
            seat, ending = self.held.pop(key), endings.get(key)
            condition = (ending or {}).get("stop_condition")
            if isinstance(condition, str):
                seat.trace.stop(condition)
            elif truncated:
                seat.trace.stop("env_truncated")
            await seat.context.__aexit__(None, None, None)
            if ending is not None:
                ended.append((seat.trace, ending))
        return ended

    async def abort(self, error: BaseException) -> None:
        """Close every seat with the run's error (Verifiers fails or aborts each rollout by it)."""
        while self.held:
            _, seat = self.held.popitem()
            try:
                await seat.context.__aexit__(type(error), error, error.__traceback__)
            except Exception:  # (the run's error is what the run ends with)
                log.debug("a seat failed while closing", exc_info=True)


def _pinned(agent: Any, model: Any) -> Any:
    """The run's agent, calling `model` where a seat names a model of its own (Verifiers' episode agents are a
    bundle of references to the env's resources: a copy shares them)."""
    if not isinstance(model, str) or not model or model == agent.ctx.model:
        return agent
    seated = copy.copy(agent)
    seated.config = agent.config.model_copy(update={"model": model})
    seated.ctx = dataclasses.replace(agent.ctx, model=model)
    return seated

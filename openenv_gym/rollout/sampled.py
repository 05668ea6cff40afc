"""A rollout plan whose tasks a sampler chooses, one per group (openenv_gym.sampling): each finished group's rewards
go back to the sampler, and gates drop the groups a trainer cannot use. A dropped group is replaced by another, up
to `max_extra` of them in the run; past that the run ends short, and the sampler's metrics say how many short."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Sequence
from typing import Any

from openenv_gym.episode.state import cost_unit, env_seconds, seconds_asked
from openenv_gym.rollout.groups import Group
from openenv_gym.rollout.plan import Plan
from openenv_gym.rollout.records import Episode

Gate = Callable[[Sequence[float]], bool]


class SampledPlan(Plan):
    def __init__(self, sampler: Any, groups: int | None, seed: int | None, options: dict[str, Any],
                 gates: Sequence[Gate] = (), max_extra: int = 0, skip: Collection[int] = ()) -> None:
        super().__init__(groups, self._drawn(), seed, options | seconds_asked(sampler), skip)
        self.sampler, self.gates, self.extra = sampler, list(gates), max_extra
        self.drawn: dict[str, Any] = {}  # group id -> the task the sampler gave
        self.last: dict[str, Any] = {}

    def _drawn(self) -> Iterator[dict[str, Any]]:
        while True:
            self.last = self.sampler.sample(1)[0]
            yield self.last

    def next(self) -> tuple[int | None, dict[str, Any]] | None:
        planned = super().next()
        if planned is not None:
            self.drawn[f"g{self.count - 1}"] = self.last
        return planned

    def settle(self, group: Group) -> bool:
        """The group's rewards to the sampler; whether the gates keep it (a dropped one is replaced while the run
        may still play extra groups)."""
        task = self.drawn.pop(group.id, None)
        played = [episode for episode in group.episodes if episode.error is None]
        rewards = [episode.total_reward for episode in played]
        if task is None or not rewards:
            return True  # (a group every member of which failed: the trainer sees its errors)
        unit = cost_unit(self.sampler)
        self.sampler.update(task, rewards, None if unit == "episodes" else [episode_cost(e, unit) for e in played])
        if all(gate(rewards) for gate in self.gates):
            return True
        _count(self.sampler, "dropped")
        if self.left is not None:
            if self.extra > 0:
                self.extra -= 1
                self.left += 1
            else:
                _count(self.sampler, "short")
        return False


def episode_cost(episode: Episode, unit: str) -> float:
    """What an episode cost in "tokens" (its turns' completion tokens) or "seconds" (the environment's time, which
    the server gives in the final step's info)."""
    if unit == "tokens":
        if not episode.tokens or any(turn.completion_ids is None for turn in episode.tokens):
            raise ValueError("the sampler counts cost in tokens, but an episode has a turn without its token ids: use "
                             "a policy that gives them (OpenAIPolicy does when the model server returns token ids), "
                             "or cost='episodes'")
        return float(sum(len(turn.completion_ids or ()) for turn in episode.tokens))
    return env_seconds(episode.info)


def _count(sampler: Any, what: str) -> None:
    if hasattr(sampler, "note"):  # (a sampler of RFC 013's interface alone keeps no such count)
        sampler.note(what)

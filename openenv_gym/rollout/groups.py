"""GRPO groups in the rollout stream: each task played G times at once, its G episodes yielded together.

`rollouts(..., group_size=G)` hands out every planned task G times, each copy tagged with the group's id, and
yields a `Group` once all G episodes of a task have finished: each episode with its group id and its advantage
(its return against the group's; `advantage="mean"`, `"mean_std"` or a function of the returns). A member that
failed (the env or the policy) is played again on the same task, up to `replacements` times per group; a group
that still lacks a good member is yielded with `complete=False`, its failed members marked (`Episode.error`),
so that a trainer can drop or mask it: a group never shrinks without a word. Where the environment scores groups
(`score_group`, run by the server: server/groups.py), each member's `group_reward` is what it gave, and the
advantages are taken of those.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from openenv_gym.rollout.records import Episode

Advantage = Literal["mean", "mean_std"] | Callable[[Sequence[float]], Sequence[float]]
STD_EPSILON = 1e-4  # added to the standard deviation, as GRPO implementations do, so that equal returns give 0


@dataclass(slots=True)
class Group:
    """The G episodes of one task, played together."""

    id: str
    episodes: list[Episode] = field(default_factory=list)
    complete: bool = True  # every member finished without an error

    @property
    def rewards(self) -> list[float]:
        return [episode.total_reward for episode in self.episodes]


def advantages(returns: Sequence[float], how: Advantage) -> list[float]:
    """Each return against its group's: minus the mean ("mean"), then over the standard deviation ("mean_std"),
    or what the function given makes of them."""
    if callable(how):
        made = [float(value) for value in how(list(returns))]
        if len(made) != len(returns):
            raise ValueError(f"the advantage function gave {len(made)} values for a group of {len(returns)}")
        return made
    mean = statistics.fmean(returns) if returns else 0.0
    centred = [value - mean for value in returns]
    if how == "mean":
        return centred
    if how == "mean_std":
        spread = statistics.pstdev(returns) if len(returns) > 1 else 0.0
        return [value / (spread + STD_EPSILON) for value in centred]
    raise ValueError(f"advantage must be 'mean', 'mean_std' or a function of the returns, not {how!r}")


class GroupCollector:
    """Gathers the stream's finished episodes into groups; says which failed members to play again."""

    def __init__(self, size: int, advantage: Advantage, replacements: int) -> None:
        if size < 1:
            raise ValueError(f"group_size must be at least 1, got {size}")
        advantages([0.0], advantage)  # a bad advantage= fails now, not at the first group
        self.size, self.advantage, self.replacements = size, advantage, replacements
        self.open: dict[str, _Open] = {}

    def begin(self, group: str, planned: Any) -> None:
        self.open[group] = _Open(planned, self.replacements)

    def add(self, episode: Episode) -> tuple[Group | None, Any]:
        """(the group, if this episode completes it; what to play again in its place, if it failed and may be).
        A completed group's advantages are set by `settle`, once its group rewards (if any) are in."""
        assert episode.group is not None
        pending = self.open[episode.group]
        if episode.error is not None and pending.replacements_left > 0:
            pending.replacements_left -= 1
            return None, pending.planned
        pending.episodes.append(episode)
        if len(pending.episodes) < self.size:
            return None, None
        del self.open[episode.group]
        episodes = sorted(pending.episodes, key=lambda e: e.group_member or 0)
        return Group(episode.group, episodes, complete=all(e.error is None for e in episodes)), None

    def settle(self, group: Group) -> Group:
        """Each good member's advantage: its group reward (where the group was scored) or its return, against the
        group's. A member that failed gets none, and makes the group incomplete."""
        good = [e for e in group.episodes if e.error is None]
        values = advantages([e.total_reward if e.group_reward is None else e.group_reward for e in good],
                            self.advantage) if good else []
        for episode, value in zip(good, values, strict=True):
            episode.advantage = value
        group.complete = len(good) == self.size
        return group


@dataclass(slots=True)
class _Open:
    planned: Any  # what each member plays: (seed, reset options)
    replacements_left: int
    episodes: list[Episode] = field(default_factory=list)

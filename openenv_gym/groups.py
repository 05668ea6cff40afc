"""GRPO groups in the vector env: envs [kG, (k+1)G) play the same tasks, in the same order.

Each group has a sequence of seeds; an env's n-th episode plays its group's n-th seed, whenever the env gets to it
(members end their episodes at different steps, and none waits for the others). An episode is named "k.n" in its
infos, for a trainer to gather the G results of one task. An explicit reset with a seed starts the groups it
touches again from that seed (reset whole groups, or their members part ways).

Where the environment scores groups (the server runs its score_group: server/groups.py), each reset carries the
option naming its episode's group and member, and `ended` tells when the last member of a group has ended. Where
a task sampler chooses each group episode's task (`draw_task`), `ended` gives it back with the members' returns.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class Ending:
    """How one group episode is ending: its members ended so far, and of those the ones that did not fail, with
    their returns and costs (None where a member gave none)."""

    ended: int = 0
    kept: int = 0
    returns: list[float] = field(default_factory=list)
    costs: list[float | None] = field(default_factory=list)


@dataclass(slots=True)
class Ended:
    """A group episode whose last member ended: its name ("k.n"), its leader env, how many members did not fail,
    their returns and costs, and the task a sampler gave it (None: no sampler)."""

    name: str
    leader: int
    kept: int
    returns: list[float]
    costs: list[float | None]
    task: dict[str, Any] | None


class Groups:
    def __init__(self, num_envs: int, size: int, draw_task: Callable[[], dict[str, Any]] | None = None) -> None:
        self.size = size
        self.episode = [-1] * num_envs  # each env's episode index in its group's sequence
        self.sequences: list[dict[int, int]] = [{} for _ in range(num_envs // size)]  # group -> {n: seed}
        self.endings: dict[tuple[int, int], Ending] = {}  # (group, n) -> its members' endings so far
        self.draw_task = draw_task
        self.tasks: dict[tuple[int, int], dict[str, Any]] = {}  # (group, n) -> the task drawn for it

    def leaders(self, envs: Sequence[int]) -> list[int]:
        """The first env of each group these envs belong to."""
        return sorted({env - env % self.size for env in envs})

    def seeds(self, envs: Sequence[int], fresh: list[int] | None, draw: Callable[[int], int]) -> list[int]:
        """The seed of each env's next episode. `fresh` (one per leader): an explicit reset's seeds, which start
        those groups' sequences again; `draw(leader)` makes a group's next seed."""
        if fresh is not None:
            for leader, seed in zip(self.leaders(envs), fresh, strict=True):
                self.sequences[leader // self.size] = {0: seed}
                for table in (self.endings, self.tasks):
                    for key in [key for key in table if key[0] == leader // self.size]:
                        del table[key]
                for env in range(leader, leader + self.size):
                    self.episode[env] = -1
        seeds = []
        for env in envs:
            group = env // self.size
            self.episode[env] += 1
            sequence, n = self.sequences[group], self.episode[env]
            if n not in sequence:
                sequence[n] = draw(group * self.size)
            if self.draw_task is not None and (group, n) not in self.tasks:
                self.tasks[group, n] = self.draw_task()
            seeds.append(sequence[n])
            self._forget_played(group)
        return seeds

    def _forget_played(self, group: int) -> None:
        """Drop the seeds every member has gone past (a long run keeps a few per group, not one per episode)."""
        start = group * self.size
        oldest = min(self.episode[start:start + self.size])
        sequence = self.sequences[group]
        for n in [n for n in sequence if n < oldest]:
            del sequence[n]

    def label(self, infos: Sequence[dict[str, Any]], envs: Sequence[int]) -> None:
        for info, env in zip(infos, envs, strict=True):
            info["group"] = self.name(env)

    def task(self, env: int) -> dict[str, Any]:
        """The reset options of the task the env's current episode plays (its group's, drawn by the sampler)."""
        return self.tasks.get((env // self.size, self.episode[env]), {})

    def option(self, env: int) -> dict[str, Any]:
        """The reset option that makes the env's current episode its member of its group's episode (for the
        server to keep it until the group is scored)."""
        return {"id": self.name(env), "member": env % self.size}

    def name(self, env: int) -> str:
        return f"{env // self.size}.{self.episode[env]}"

    def ended(self, env: int, kept: bool, returned: float = 0.0, cost: float | None = None) -> Ended | None:
        """The env's current episode ended (`kept`: normally, with this return and cost; else it failed). The group
        episode, when this was its last member."""
        key = (env // self.size, self.episode[env])
        ending = self.endings.setdefault(key, Ending())
        ending.ended += 1
        if kept:
            ending.kept += 1
            ending.returns.append(returned)
            ending.costs.append(cost)
        if ending.ended < self.size:
            return None
        del self.endings[key]
        return Ended(self.name(env), key[0] * self.size, ending.kept, ending.returns, ending.costs,
                     self.tasks.pop(key, None))

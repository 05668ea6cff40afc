"""Finished episodes as the trainers take them: the conversation, the tokens of each turn when the policy gave
them, per-step rewards, the return, how it ended, and why if it failed. One JSON line each in episode files."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import orjson


@dataclass(slots=True)
class TurnTokens:
    """One model turn's tokens, as the model server gave them (None where it gave none)."""

    prompt_ids: list[int] | None
    completion_ids: list[int] | None
    logprobs: list[float] | None


@dataclass(slots=True)
class Episode:
    """One finished episode."""

    env_index: int  # which of the stream's sessions played it
    seed: int | None
    options: dict[str, Any]  # its reset options (the task: split + index, task_spec, ...)
    messages: list[dict[str, Any]] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)  # one per env step
    tokens: list[TurnTokens] = field(default_factory=list)  # one per model turn
    # the turn graph of the program behind an agent env, one node per model request it made (info["turn"]: its
    # parent turn, branch, and whether it goes on from its branch or starts one: episode/turn_graph.py)
    turns: list[dict[str, Any]] = field(default_factory=list)
    terminated: bool = False
    truncated: bool = False
    info: dict[str, Any] = field(default_factory=dict)  # the last step's (or the reset's) info
    error: str | None = None  # why the episode stopped early: the env or the model server failed
    group: str | None = None  # the id of the group it was played in (rollouts(group_size=G))
    group_member: int | None = None  # which of the group's G plays it is
    advantage: float | None = None  # its return against its group's (None: no group, or it failed)
    group_reward: float | None = None  # what its group's scoring gave it (a GroupJudge), where there is one
    training: list[dict[str, Any]] | None = None  # its training records, where asked for (rollouts(record="train"))

    @property
    def total_reward(self) -> float:
        """The return: the sum of the step rewards."""
        return float(sum(self.rewards))

    @property
    def steps(self) -> int:
        return len(self.rewards)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (one line of `openenv-gym rollout --output`)."""
        whole = asdict(self) | {"total_reward": self.total_reward, "steps": self.steps}
        del whole["training"]  # (written as records of their own: rollout --export train)
        return whole


def read_lines(path: Path) -> Iterator[tuple[bytes, Any]]:
    """Each non-blank line of an episodes file: (the line, its JSON value, or None when it is not JSON: a line a
    run was cut short in, or not an episode file at all)."""
    for raw in path.read_bytes().splitlines():
        if not raw.strip():
            continue
        try:
            yield raw, orjson.loads(raw)
        except orjson.JSONDecodeError:
            yield raw, None

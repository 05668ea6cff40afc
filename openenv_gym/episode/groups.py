"""GRPO groups, server side: which episodes form a group, what is kept of each, and what a group score must be.

A reset with the option `group: {"id": "g7", "member": 2}` makes its episode member 2 of group g7 (of its
connection). When the episode ends, the server keeps a `FinishedEpisode` of it (the environment's
`episode_record()` among it) until the client asks for the group's score, and the environment's
`score_group(episodes)` scores the members together: one reward (or `{"reward": r, ...info}`) per member.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from openenv_gym.errors import BadRequestError, EnvError

GROUP_OPTION = "group"  # the reset option that makes an episode a member of a group
MAX_GROUP_SIZE = 1024  # members a group may have (a client-controlled size: bounded)
MAX_GROUP_ID_CHARS = 255


@dataclass(slots=True)
class FinishedEpisode:
    """What the server keeps of a group member's episode once it ended."""

    member: int
    episode_id: str
    reward: float  # the sum of its steps' rewards
    steps: int
    info: dict[str, Any]  # its last step's info
    truncated: bool
    record: Any = None  # the environment's own record of it (Environment.episode_record())


@dataclass(slots=True)
class GroupScore:
    """A scored group: per member (in member order), its group reward and what the environment adds to its info."""

    members: list[int]
    rewards: list[float]
    infos: list[dict[str, Any]] = field(default_factory=list)

    def of(self, member: int) -> tuple[float, dict[str, Any]] | None:
        """The member's group reward and info; None when the score leaves it out (it failed, or never ended)."""
        if member not in self.members:
            return None
        k = self.members.index(member)
        return self.rewards[k], self.infos[k]


def group_of(options: dict[str, Any] | None) -> tuple[str, int] | None:
    """(group id, member) of a reset's `group` option; None without one; BadRequestError when malformed."""
    if not options or GROUP_OPTION not in options:
        return None
    given = options[GROUP_OPTION]
    if not isinstance(given, dict):
        raise BadRequestError(f"option {GROUP_OPTION} must be an object {{\"id\": str, \"member\": int}}, "
                              f"got {given!r:.80}")
    group, member = given.get("id"), given.get("member", 0)
    if type(group) is not str or not 0 < len(group) <= MAX_GROUP_ID_CHARS:
        raise BadRequestError(f"option {GROUP_OPTION}.id must be a string of 1 to {MAX_GROUP_ID_CHARS} "
                              f"characters, got {group!r:.80}")
    if type(member) is not int or not 0 <= member < MAX_GROUP_SIZE:
        raise BadRequestError(f"option {GROUP_OPTION}.member must be an integer from 0 to {MAX_GROUP_SIZE - 1}, "
                              f"got {member!r:.80}")
    return group, member


def without_group(options: dict[str, Any] | None) -> dict[str, Any] | None:
    """The reset options the environment gets: the group option is the server's."""
    if not options or GROUP_OPTION not in options:
        return options
    return {key: value for key, value in options.items() if key != GROUP_OPTION}


def group_score(values: Any, episodes: list[FinishedEpisode], scorer: str) -> GroupScore:
    """What `score_group` returned, checked: one number, or one object with a numeric "reward", per member.
    EnvError names `scorer` and what is wrong."""
    try:
        values = list(values)
    except TypeError:
        raise EnvError(f"{scorer} returned {type(values).__name__}, not a list of one score per member") from None
    if len(values) != len(episodes):
        raise EnvError(f"{scorer} returned {len(values)} scores for a group of {len(episodes)} episodes; "
                       "it must return one per episode, in the order given")
    rewards, infos = [], []
    for k, value in enumerate(values):
        info: dict[str, Any] = {}
        if isinstance(value, dict):
            info = {key: item for key, item in value.items() if key != "reward"}
            value = value.get("reward")
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise EnvError(f"{scorer} gave member {episodes[k].member} the score {value!r:.80}; a score is a number "
                           "or an object with a numeric 'reward'")
        rewards.append(float(value))
        infos.append(info)
    return GroupScore([episode.member for episode in episodes], rewards, infos)

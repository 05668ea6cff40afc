"""Episode files as `openenv-gym rollout --output` writes them, from real rollouts of the shipped `guess` env with a
scripted policy whose episodes differ: some bisect to the number, some guess at random until they are cut off,
some give up, and some fail (the policy raises)."""

import contextlib
import random
import re
from pathlib import Path

import orjson

from openenv_gym import Reply, rollouts
from openenv_gym.rollout.turns import ToolCall

RANGE_HINT = re.compile(r"(higher|lower) than (\d+)")


class VariedPolicy:
    def __init__(self, seed: int = 0) -> None:
        self.random = random.Random(seed)

    async def __call__(self, messages, tools):
        style = self.random.random()
        if style < 0.005:
            raise RuntimeError("the scripted policy failed on purpose")
        if style < 0.08:
            return Reply(text="I give up.", tool_calls=[ToolCall("give_up", {})])
        low, high = 1, 100
        for message in messages:
            for hint, number in RANGE_HINT.findall(str(message.get("content"))):
                low, high = (max(low, int(number) + 1), high) if hint == "higher" else (low, min(high, int(number) - 1))
        guess = (low + high) // 2 if style < 0.6 else self.random.randint(1, 100)
        return Reply(text=f"Trying {guess}.", tool_calls=[ToolCall("guess", {"number": guess})],
                     completion_ids=[1, 2, 3], reasoning=f"Between {low} and {high}: {guess}.")


async def write_episodes(path: Path, url: str, count: int, *, max_turns: int = 8) -> list[dict]:
    """Play `count` episodes of guess on the server at `url`; write them to `path`, return them as written."""
    lines = []
    stream = rollouts("openenv/guess", VariedPolicy(), base_url=url, num_envs=min(64, count), episodes=count,
                      seed=0, max_turns=max_turns)
    async with contextlib.aclosing(stream):
        async for episode in stream:
            lines.append(episode.to_json())
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    return lines


async def write_group_episodes(path: Path, url: str, groups: int, size: int) -> list[dict]:
    """Play `groups` GRPO groups of `size` on a server of tests/envs/contest (the group's longest reply wins, scored
    by the server), replies of random lengths and a few members failing (not played again); write them as
    `openenv-gym rollout --group-size` does, return them as written."""
    chance = random.Random(1)

    async def policy(messages, tools):
        if chance.random() < 0.05:
            raise RuntimeError("the scripted policy failed on purpose")
        return "x" * chance.randint(1, 40)

    lines = []
    stream = rollouts("openenv/ors", policy, base_url=url, transport="native", num_envs=16, episodes=groups,
                      group_size=size, replacements=0)
    async with contextlib.aclosing(stream):
        async for group in stream:
            lines += [episode.to_json() | {"group_complete": group.complete} for episode in group.episodes]
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    return lines

"""Scoring stored episodes again with the environment as it is now: each episode's actions replayed in a fresh
session, on its seed and reset options, for the rewards the env's current verifier gives them.

    async for index, rescored in rescore("openenv/guess", episodes, num_envs=64):
        ...

`episodes` are episode records as `rollouts()` writes them (rollout/records.py). A replay takes the episode's
actions in order and stops where the env ends the episode, or where the actions run out; `same_ending` says
whether it ended at the same step, in the same way, as the record.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from openenv_gym.client.results import VectorResult
from openenv_gym.client.vector import AsyncVectorClient
from openenv_gym.episode.results import Action
from openenv_gym.episode.toolcalls import normalize_tool_call
from openenv_gym.targets import resolve


@dataclass(slots=True)
class Rescored:
    rewards: list[float] = field(default_factory=list)
    terminated: bool = False
    truncated: bool = False
    error: str | None = None  # the replay failed: the env (or its server) could not play it
    same_ending: bool = False  # it ended at the record's step, terminated or truncated as the record was

    @property
    def total_reward(self) -> float:
        return float(sum(self.rewards))


def played_actions(record: dict[str, Any]) -> list[Action]:
    """The actions an episode record played: its assistant messages, the tool call each made, else its text."""
    actions: list[Action] = []
    for message in record.get("messages") or []:
        if not isinstance(message, dict) or message.get("role") != "assistant":
            continue
        call = normalize_tool_call(message.get("tool_calls") or None)
        actions.append(call if call is not None else str(message.get("content") or ""))
    return actions


class _Replay:
    __slots__ = ("actions", "index", "record", "result", "sent")

    def __init__(self, index: int, record: dict[str, Any]) -> None:
        self.index, self.record = index, record
        self.actions = played_actions(record)
        self.result = Rescored()
        self.sent = 0  # actions sent so far: 0 while the reset is answered

    def finish(self) -> None:
        record, result = self.record, self.result
        result.same_ending = result.error is None and len(result.rewards) == len(record.get("rewards") or []) and (
            result.terminated, result.truncated) == (bool(record.get("terminated")), bool(record.get("truncated")))


async def rescore(env_id: str, episodes: Sequence[dict[str, Any]], *, num_envs: int = 64,
                  **make_kwargs: Any) -> AsyncIterator[tuple[int, Rescored]]:
    """(index into `episodes`, what the replay scored), as replays finish. make_kwargs: what gym.make takes."""
    if not episodes:
        return
    target = resolve(env_id, **make_kwargs)
    client = await target.open_vector_client(min(num_envs, len(episodes)))
    replays = _Replays(client, episodes, target.options)
    try:
        for env in range(client.num_envs):
            replays.start(env)
        while replays.playing:
            for finished in replays.absorb(await client.recv(min_results=1)):
                yield finished.index, finished.result
    finally:
        await client.close()


class _Replays:
    def __init__(self, client: AsyncVectorClient, episodes: Sequence[dict[str, Any]], defaults: dict[str, Any]) -> None:
        self.client, self.defaults = client, defaults
        self.waiting = deque(enumerate(episodes))
        self.playing: dict[int, _Replay] = {}

    def start(self, env: int) -> None:
        if not self.waiting:
            self.playing.pop(env, None)
            return
        index, record = self.waiting.popleft()
        self.playing[env] = _Replay(index, record)
        options = record.get("options") if isinstance(record.get("options"), dict) else {}
        self.client.send_reset([env], record.get("seed"), self.defaults | options)

    def absorb(self, result: VectorResult) -> list[_Replay]:
        finished = []
        for k, env in enumerate(result.ids.tolist()):
            replay = self.playing[env]
            rescored, error = replay.result, result.errors.get(env)
            if error is not None:
                rescored.error = f"{type(error).__name__}: {error}"
            elif replay.sent:  # a step's answer
                rescored.rewards.append(float(result.rewards[k]))
                rescored.terminated, rescored.truncated = bool(result.terminated[k]), bool(result.truncated[k])
            if error is None and not (rescored.terminated or rescored.truncated) and replay.sent < len(replay.actions):
                self.client.send([replay.actions[replay.sent]], [env])
                replay.sent += 1
                continue
            replay.finish()
            finished.append(replay)
            self.start(env)
        return finished

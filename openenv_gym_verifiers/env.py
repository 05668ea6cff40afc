"""The env of a run: one episode in a session of the openenv-gym server, the env playing the user.

Its observations open the exchange and answer each reply (a tool's answer where the reply called a tool, else the
user's); each reply is the step's action, as `rollouts()` makes it (rollout/turns.py). An environment that plays a
model conversation itself (an agent program, a Verifiers or NeMo Gym env: ASSISTANT_MESSAGES) asks with its own
messages and tools, which go to the model as they are. The episode's return is the trace's reward ("reward"), or its
rewards by name where the env gives them; its metrics are the trace's.

One connection per process and server carries every run's session (the server's batching and its workers do the
rest); a run that is cancelled or fails closes its session.
"""

from __future__ import annotations

import asyncio
from typing import Any

import verifiers.v1 as vf
from verifiers.v1.dialects.chat import message_to_wire
from verifiers.v1.runtimes.subprocess import SubprocessConfig

from openenv_gym.client.native.connection import Connection
from openenv_gym.client.native.handshake import connect
from openenv_gym.episode.assistant import ASSISTANT_MESSAGES
from openenv_gym.episode.results import episode_failure
from openenv_gym.episode.tasks import TASK_SPEC
from openenv_gym.errors import EnvError
from openenv_gym.rollout.openai import reply_of
from openenv_gym.rollout.turns import Reply, action_of, assistant_message, episode_tools, observation_message
from openenv_gym_verifiers.harness import close_client, requests
from openenv_gym_verifiers.speedups import memoize_default_factory_check

REWARD = "reward"  # the trace's reward: the episode's return, where the env names no rewards of its own

_connections: dict[str, tuple[Connection, dict[str, Any]]] = {}
_opening: dict[str, asyncio.Lock] = {}


class OpenEnvGymEnvConfig(vf.EnvConfig):
    # (its model calls run in process: harness.py; a limit of turns or tokens is the player's, as Verifiers reads it)
    player: vf.AgentConfig = vf.AgentConfig(runtime=SubprocessConfig())


class OpenEnvGymEnv(vf.Env[OpenEnvGymEnvConfig]):
    async def start(self) -> None:
        """When this process starts serving (each of Verifiers' server processes)."""
        memoize_default_factory_check()
        await super().start()

    async def stop(self) -> None:
        """When the server stops serving: this process's connections closed."""
        await super().stop()
        await close_client()
        while _connections:
            connection, _ = _connections.popitem()[1]
            await connection.close()

    async def run(self, task: Any, agents: Any) -> None:
        connection, description = await _connected(self.config.taskset.url)
        own_messages = bool(description.get(ASSISTANT_MESSAGES))
        session = connection.session()
        try:
            obs, info = await session.reset(seed=task.data.seed, options=_options(task.data, description))
            system = [{"role": "system", "content": task.data.system_prompt}] if task.data.system_prompt else []
            conversation = [*system, {"role": "user", "content": obs}]
            tools = episode_tools(info, description)
            said: list[dict[str, Any]] = [conversation[-1]]
            total, final, truncated, opening = 0.0, info, False, True
            async with agents.player.interaction(task) as interaction:
                trace = interaction.trace
                while True:
                    requests[trace.id] = {"messages": info["messages"], "tools": episode_tools(info, {})} \
                        if own_messages else {"messages": conversation, "tools": tools}
                    try:  # (a task that has a prompt of its own, a v1 env's, takes its first turn bare)
                        segment = await interaction.turn(None if opening and task.data.prompt is not None else said)
                        opening = False
                    finally:
                        requests.pop(trace.id, None)
                    if segment.terminated:
                        break
                    answer = message_to_wire(segment.messages[-1])
                    reply = reply_of({"choices": [{"message": answer}]})
                    action = _as_written(answer, reply) if own_messages else action_of(reply)
                    obs, reward, terminated, truncated, info = await session.step(action)
                    total, final = total + reward, info
                    if terminated or truncated:
                        break
                    said = [observation_message(obs, reply)]
                    conversation += [_sent_back(answer, reply), *said]
                if truncated:
                    trace.stop("env_truncated")
                elif isinstance(final.get("stop_condition"), str):
                    trace.stop(final["stop_condition"])
            failure = episode_failure(final)
            if failure is not None:  # (the run's error, unscored: Verifiers keeps the trace, the episode not ok)
                raise EnvError(f"the episode failed: {failure}")
            _score(trace, total, final)
        finally:
            await session.close()


def _options(data: Any, description: dict[str, Any]) -> dict[str, Any]:
    """The reset options of a task: its data's own fields; for an env of a Verifiers v1 taskset (here, or on a v1 env
    server), its whole data, the dump of that taskset's TaskData (the env validates it into its own type)."""
    if description.get("source") == "verifiers" and TASK_SPEC in description.get("reset_options", ()):
        return {TASK_SPEC: data.model_dump(mode="json", exclude={"seed"}, exclude_none=True)}
    return data.reset_options()


def _as_written(answer: dict[str, Any], reply: Reply) -> dict[str, Any]:
    """The turn's message, for an env that plays the conversation itself: its tool calls as the model wrote them
    (their ids, their arguments' text), every one, as Verifiers' own server passes them on."""
    return action_of(reply, True) | {"tool_calls": list(answer.get("tool_calls") or ())}


def _sent_back(answer: dict[str, Any], reply: Reply) -> dict[str, Any]:
    """The reply as the next request carries it: as the model wrote it (the trace goes on from its turn), unless it
    called several tools, of which one was played (the others would have no answer)."""
    return answer if len(answer.get("tool_calls") or ()) <= 1 else assistant_message(reply)


def _score(trace: Any, total: float, info: dict[str, Any]) -> None:
    rewards, weights = info.get("rewards"), info.get("reward_weights") or {}
    if isinstance(rewards, dict) and rewards:
        for name, score in rewards.items():
            trace.record_reward(name, float(score), float(weights.get(name, 1.0)))
    else:
        trace.record_reward(REWARD, total)
    metrics = info.get("metrics")
    if isinstance(metrics, dict):
        trace.record_metrics({name: float(value) for name, value in metrics.items()
                              if isinstance(value, int | float) and not isinstance(value, bool)})


async def _connected(url: str) -> tuple[Connection, dict[str, Any]]:
    """This process's connection to the server at `url`, and its env's description; opened again if it was lost."""
    held = _connections.get(url)
    if held is not None and not held[0].closed:
        return held
    async with _opening.setdefault(url, asyncio.Lock()):
        held = _connections.get(url)
        if held is None or held[0].closed:
            connection = await connect(url)
            held = _connections[url] = (connection, (await connection.info())["env"])
    return held

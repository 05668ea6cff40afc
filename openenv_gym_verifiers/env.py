"""The env of a run: one episode in a session of the openenv-gym server, the env playing the user.

Its observations open the exchange and answer each reply (a tool's answer where the reply called a tool, else the
user's); each reply is the step's action, as `rollouts()` makes it (rollout/turns.py). An environment that plays a
model conversation itself (an agent program, a Verifiers or NeMo Gym env: ASSISTANT_MESSAGES) asks with its own
messages and tools, which go to the model as they are. The episode's return is the trace's reward ("reward"), or its
rewards by name where the env gives them; its metrics are the trace's. An env of several agents (a v1 env's seats)
gives a trace per agent run (seats.py).

One connection per process and server carries every run's session (the server's batching and its workers do the
rest); a run that is cancelled or fails closes its session.
"""

from __future__ import annotations

import asyncio
from typing import Any

import verifiers.v1 as vf
import verifiers.v1.errors as vf_errors
from verifiers.v1.dialects.chat import message_to_wire
from verifiers.v1.runtimes.subprocess import SubprocessConfig

from openenv_gym.client.native.connection import Connection
from openenv_gym.client.native.handshake import connect
from openenv_gym.episode.assistant import ASSISTANT_MESSAGES, REPLY_TAKEN, REWRITES_REPLIES
from openenv_gym.episode.results import episode_failure
from openenv_gym.episode.tasks import TASK_SPEC
from openenv_gym.errors import EnvError
from openenv_gym.rollout.openai import reply_of
from openenv_gym.rollout.turns import Reply, action_of, assistant_message, episode_tools, observation_message
from openenv_gym_verifiers.harness import close_client, requests
from openenv_gym_verifiers.seats import Seats
from openenv_gym_verifiers.speedups import memoize_default_factory_check
from openenv_gym_verifiers.taskset import RepliesTakenTask

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
        steps = Steps(session, own_messages)  # (taken at the model boundary where the env may rewrite a reply)
        seats = Seats(agents.player, RepliesTakenTask(task, steps.take) if description.get(REWRITES_REPLIES) else task)
        try:
            obs, info = await session.reset(seed=task.data.seed, options=_options(task.data, description))
            system = [{"role": "system", "content": task.data.system_prompt}] if task.data.system_prompt else []
            conversation = [*system, {"role": "user", "content": obs}]
            tools = episode_tools(info, description)
            said: list[dict[str, Any]] = [conversation[-1]]
            total, final, truncated = 0.0, info, False
            try:
                while True:
                    seat = await seats.of(info)
                    trace_id = seat.trace.id
                    requests[trace_id] = {"messages": info["messages"], "tools": episode_tools(info, {})} \
                        if own_messages else {"messages": conversation, "tools": tools}
                    try:  # (a task that has a prompt of its own, a v1 env's, takes its first turn bare)
                        segment = await seat.interaction.turn(
                            None if seat.opening and task.data.prompt is not None else said)
                        seat.opening = False
                    finally:
                        requests.pop(trace_id, None)
                    if not steps.taken:
                        if segment.terminated:
                            break
                        await steps.take(segment.messages[-1])
                    answer, reply, (obs, reward, terminated, truncated, info) = steps.result()
                    total, final = total + reward, info
                    if terminated or truncated:
                        break
                    said = [observation_message(obs, reply)]
                    conversation += [_sent_back(answer, reply), *said]
            except BaseException as error:
                await seats.abort(error)
                raise
            failure = episode_failure(final)
            # (a run that failed is not scored, as Verifiers leaves it; an env of seats says which ended before)
            endings = _endings(final, total) if failure is None or "traces" in final else {}
            for trace, ending in await seats.close(endings, truncated):
                if not trace.errors:  # (a trace whose rollout failed, its model call say, is not scored either)
                    _score(trace, ending)
            if failure is not None:
                raise _failed(final["error"], failure)
        finally:
            await session.close()


class Steps:
    """The step each turn takes with the model's reply: after the turn, or, for an env that may take a reply as
    another (RepliesTakenTask), at the model boundary, while the turn is on."""

    def __init__(self, session: Any, own_messages: bool) -> None:
        self.session, self.own_messages = session, own_messages
        self.taken: tuple[dict[str, Any], Reply, Any] | BaseException | None = None

    async def take(self, message: Any) -> str | None:
        """Step with `message` (a Verifiers assistant message); the text the env took it as, if it rewrote it."""
        answer = message_to_wire(message)
        reply = reply_of({"choices": [{"message": answer}]})
        action = _as_written(answer, reply) if self.own_messages else action_of(reply)
        try:
            stepped = await self.session.step(action)
        except Exception as error:  # (raised again after the turn, by result(): the run fails with it)
            self.taken = error
            return None
        self.taken = answer, reply, stepped
        taken = stepped[4].get(REPLY_TAKEN)
        return taken if isinstance(taken, str) else None

    def result(self) -> tuple[dict[str, Any], Reply, Any]:
        """(the reply as written, as read, the step's result) of the turn's step."""
        taken, self.taken = self.taken, None
        if isinstance(taken, BaseException):
            raise taken
        assert taken is not None, "result() after take()"
        return taken


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


def _failed(error: dict[str, Any], failure: str) -> Exception:
    """The run's error: a v1 env's own, as its episode recorded it (Verifiers' boundary passes its errors through,
    so the run reports what Verifiers' own server would), else the env's reason."""
    recorded = error.get("verifiers")
    if isinstance(recorded, list) and len(recorded) == 1 and isinstance(recorded[0], dict):
        kind = getattr(vf_errors, str(recorded[0].get("type")), None)
        if isinstance(kind, type) and issubclass(kind, vf_errors.RolloutError):
            return kind(str(recorded[0].get("message")))
    return EnvError(f"the episode failed: {failure}")


def _endings(final: dict[str, Any], total: float) -> dict[str, dict[str, Any]]:
    """How each trace of the episode ended, by trace id: as the env's last info says, each of its traces (an env of
    seats), or the episode's (its rewards by name, else its return as REWARD), its one trace's."""
    traces = final.get("traces")
    if isinstance(traces, list):
        return {str(trace["id"]): trace for trace in traces if isinstance(trace, dict) and "id" in trace}
    rewards = final.get("rewards")
    return {"": {"rewards": rewards if isinstance(rewards, dict) and rewards else {REWARD: total},
                 "reward_weights": final.get("reward_weights") or {}, "metrics": final.get("metrics"),
                 "stop_condition": final.get("stop_condition")}}


def _score(trace: Any, ending: dict[str, Any]) -> None:
    weights = ending.get("reward_weights") or {}
    for name, score in (ending.get("rewards") or {}).items():
        trace.record_reward(name, float(score), float(weights.get(name, 1.0)))
    metrics = ending.get("metrics")
    if isinstance(metrics, dict):
        trace.record_metrics({name: float(value) for name, value in metrics.items()
                              if isinstance(value, int | float) and not isinstance(value, bool)})
    if isinstance(ending.get("info"), dict):
        trace.info.update(ending["info"])


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

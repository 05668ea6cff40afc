"""Run Prime Intellect Verifiers environments (classic API, manifest kind "verifiers"), one rollout per session.

`load_environment(**env_args)` runs once per worker process, on its main thread (constructing an env
installs signal handlers, which only the main thread may do). Each session is one `env.run_rollout`
task driven by the environment's own loop: the model client it is given parks every model request
until the session's next step answers it (see classic_rollout.py). Stop conditions, `env_response`,
tools, timeouts, cleanup and the rubric run unchanged, so rewards are exactly what verifiers computes.

reset:  a row from split "train" or "eval" (options task, or split+index, or a seeded choice); the
        observation is the prompt rendered as text, the messages and the tools are in info.
step:   the assistant message (text, or {"content", "tool_calls"}); tool calls written in the text are
        parsed for environments with tools. The observation is the environment's response.
reward: 0.0 until the rollout ends, then the rubric's score (metrics and stop condition in info).
The row's `answer` and `info` columns reach info only with reset option expose_answer=True.

A rubric with group reward functions scores G rollouts of one row together: its sessions run each rollout as
`run_group` does (unscored), the server keeps each finished rollout's state, and `score_group` runs the
rubric's own `score_group` over the group's states, then its cleanup (GRPO groups: episode/groups.py).
"""

from __future__ import annotations

import contextlib
import os
import time
from typing import Any

from openenv_gym.adapters.environment import Environment
from openenv_gym.adapters.long_text import read_action
from openenv_gym.adapters.vendored import load_vendored
from openenv_gym.adapters.verifiers.classic_rollout import (
    Rollout,
    callback_client_class,
    jsonable,
    message_dicts,
    render_messages,
)
from openenv_gym.episode.assistant import ASSISTANT_MESSAGES, assistant_message
from openenv_gym.episode.groups import FinishedEpisode
from openenv_gym.episode.options import CATALOG_OPTIONS, vocabulary
from openenv_gym.episode.results import ResetResult, StepResult, invalid_action, reward_of
from openenv_gym.episode.tasks import choose_task, reveals_hidden, splits_with_counts
from openenv_gym.errors import EnvError
from openenv_gym.manifests.schema import ManifestError, VerifiersManifest

# Stops that cut an episode short; any other stop (the env's own) terminates it.
TRUNCATING_STOPS = {"max_turns_reached", "timeout_reached", "prompt_too_long", "max_total_completion_tokens_reached"}
SPLITS = {"train": "train", "eval": "test"}
HIDDEN_COLUMNS = {"answer": "answer", "info": "row_info"}  # row column -> info key


class VerifiersFactory:
    """Holds the one loaded environment of this worker; makes a VerifiersSession per session."""

    grouped = False  # its rubric scores groups (GroupScoringFactory)

    def __init__(self, vf: Any, env: Any, manifest: VerifiersManifest, env_args: dict[str, Any]) -> None:
        self.env = env
        self.name = manifest.name
        self.description = manifest.description
        self.env_args = env_args
        self.client_class = callback_client_class(vf)
        self.tools = [jsonable(t) for t in getattr(env, "tool_defs", None) or []]
        self.tool_names = {t["name"] for t in self.tools}
        max_turns = int(getattr(env, "max_turns", -1) or -1)
        self.max_turns = max_turns if max_turns > 0 else None
        self.datasets = self._load_datasets()

    def _load_datasets(self) -> dict[str, Any]:
        """The train and eval datasets the environment has (built now if it builds them lazily)."""
        found = {}
        with contextlib.suppress(ValueError):  # "dataset is not set": an eval-only environment
            found["train"] = self.env.get_dataset()
        build_eval = getattr(self.env, "build_eval_dataset", None)
        if callable(build_eval):
            build_eval()
        if getattr(self.env, "eval_dataset", None) is not None:
            found["eval"] = self.env.eval_dataset
        return found

    def __call__(self) -> VerifiersSession:
        return VerifiersSession(self)

    def describe(self) -> dict[str, Any]:
        doc = self.description or (type(self.env).__doc__ or "").strip().split("\n")[0]
        return {"name": self.name, "description": doc, "action": "tools" if self.tools else "text",
                "tools": self.tools, "max_steps": self.max_turns, "source": "verifiers",
                "class": type(self.env).__name__, "env_args": self.env_args,
                "reset_options": vocabulary(CATALOG_OPTIONS), ASSISTANT_MESSAGES: True}

    # -- catalog -------------------------------------------------------------------------------

    async def splits(self) -> list[dict[str, str]]:
        return [{"name": split, "type": SPLITS[split]} for split in self.datasets]

    async def num_tasks(self, split: str) -> int:
        return len(self.datasets[split])

    async def catalog(self) -> list[dict[str, Any]]:
        return await splits_with_counts(self)

    async def tasks(self, split: str, window: range, reveal: bool) -> list[dict]:
        """The rows of a catalog listing; without their hidden columns (answer, info) unless revealed."""
        rows = [jsonable(row) for row in self.datasets[split].select(window)]
        return rows if reveal else [{k: v for k, v in row.items() if k not in HIDDEN_COLUMNS} for row in rows]

    def row(self, split: str, index: int) -> dict[str, Any]:
        return dict(self.datasets[split][index])


class GroupScoringFactory(VerifiersFactory):
    """An environment whose rubric has group reward functions: the server scores its groups with the rubric."""

    grouped = True

    async def score_group(self, episodes: list[FinishedEpisode]) -> list[dict[str, Any]]:
        states = [episode.record for episode in episodes]
        if any(state is None for state in states):
            raise EnvError("a member's rollout state is missing (its rollout failed before it ended)")
        rubric = self.env.rubric
        _time_scoring(states, "start")  # as run_group does
        await rubric.score_group(states)
        _time_scoring(states, "end")
        for state in states:
            await rubric.cleanup(state)
        return [{"reward": state["reward"], "metrics": jsonable(state.get("metrics") or {})} for state in states]


class VerifiersSession(Environment):
    def __init__(self, factory: VerifiersFactory) -> None:
        self.factory = factory
        self.rollout: Rollout | None = None
        self.state: Any = None  # a group member's finished, unscored rollout state (run_group's)
        self.prompt: list[Any] = []  # the conversation the model last saw
        self.turns = 0

    async def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> ResetResult:
        options = options or {}
        chosen = await choose_task(self.factory, self.factory.name, seed, options)
        row = self.factory.row(chosen["split"], chosen["index"])
        await self.close()  # the previous episode's rollout
        self.rollout = Rollout(self.factory.env, self.factory.client_class, row, scored=not self.factory.grouped)
        turn = await self.rollout.next_turn()
        if turn.done:
            raise EnvError(f"the rollout ended before asking the model anything: {_failure(turn.output)}")
        self.prompt, self.turns = turn.request, 0
        messages = message_dicts(turn.request)
        info: dict[str, Any] = {**chosen, "example_id": row.get("example_id"), "messages": messages}
        if reveals_hidden(options):
            info.update({key: jsonable(row.get(column)) for column, key in HIDDEN_COLUMNS.items()})
        return ResetResult(render_messages(messages), info)

    async def step(self, action: Any) -> StepResult:
        assert self.rollout is not None, "the server steps only sessions that were reset"
        self.turns += 1
        message = await read_action(assistant_message, action, self.factory.tool_names, self.turns)
        if isinstance(message, str):
            return invalid_action(message)
        turn = await self.rollout.answer(message)
        if turn.done:
            self.state = turn.output if self.factory.grouped else None
            return self._final(turn.output)
        new = turn.request[len(self.prompt) + 1:]  # after what the model saw and its own reply
        self.prompt = turn.request
        messages = message_dicts(new)
        return StepResult(render_messages(messages), info={"messages": messages})

    def _final(self, output: dict[str, Any]) -> StepResult:
        completion = message_dicts(output.get("completion") or [])
        last_reply = max((i for i, m in enumerate(completion) if m.get("role") == "assistant"), default=-1)
        messages = completion[last_reply + 1:]  # a final env response, if any
        stop = output.get("stop_condition")
        truncated = bool(output.get("is_truncated")) or (stop in TRUNCATING_STOPS and self.factory.max_turns != 1)
        info = {"messages": messages, "stop_condition": stop, "metrics": jsonable(output.get("metrics") or {}),
                "is_truncated": bool(output.get("is_truncated"))}
        if output.get("error") is not None:
            info["error"] = {"code": "env_error", "message": _failure(output)}
        reward = reward_of(output.get("reward"), info)
        # the environment's final response, or a summary when it has none: an empty observation reads as a bug
        obs = render_messages(messages) if messages else f"The episode is over ({stop or 'done'}); reward {reward:g}."
        return StepResult(obs, reward, terminated=not truncated, truncated=truncated, info=info)

    def episode_record(self) -> Any:
        state, self.state = self.state, None
        return state

    async def close(self) -> None:
        rollout, self.rollout = self.rollout, None
        if rollout is not None:
            await rollout.cancel()


def _time_scoring(states: list[Any], mark: str) -> None:
    now = time.time()
    for state in states:
        scoring = getattr(state.get("timing"), "scoring", None)  # verifiers >= 0.2's RolloutTiming
        if scoring is not None:
            setattr(scoring, mark, now)


def _failure(output: dict[str, Any]) -> str:
    error = output.get("error")
    return str(error) if error is not None else f"stop condition {output.get('stop_condition')!r}"


def load_classic_environment(manifest: VerifiersManifest,
                               env_args: dict[str, Any] | None = None) -> VerifiersFactory:
    os.environ.setdefault("VF_LOG_LEVEL", "WARNING")  # unset, verifiers logs nothing, its warnings included
    import verifiers as vf

    load_environment = load_vendored(manifest)
    if not callable(load_environment):
        raise ManifestError(f"{manifest.folder}: {manifest.entry} is not a load_environment function")
    arguments = {**manifest.env_args, **(env_args or {})}
    try:
        env = load_environment(**arguments)
    except TypeError as exc:
        raise ManifestError(f"{manifest.name}: load_environment({', '.join(arguments)}) failed: {exc}; "
                            "check the env_args") from exc
    if not isinstance(env, vf.Environment):
        raise ManifestError(f"{manifest.name}: load_environment() returned {type(env).__name__}, "
                            "not a verifiers Environment")
    if getattr(env, "requires_group_rollouts", False):
        return GroupScoringFactory(vf, env, manifest, arguments)
    return VerifiersFactory(vf, env, manifest, arguments)

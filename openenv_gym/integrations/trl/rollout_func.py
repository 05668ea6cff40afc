"""`make_rollout_func(env_id)`: a `GRPOTrainer(rollout_func=...)` that plays the whole batch's episodes at once.

    trainer = GRPOTrainer(model, reward_funcs=[env_reward], train_dataset=dataset(64),
                          rollout_func=make_rollout_func("openenv/guess", max_turns=4), ...)

Each turn generates for every episode still running in one batch (the trainer's vLLM server or its model), then
steps all of them through the vector client: one batch frame per turn, never one episode after another. The env's
answers are appended as chat messages, as tokens: the model's tokens have `env_mask` 1, the env's 0 (and the model's
too once the program behind an agent env leaves its first branch: info["turn"], episode/turn_graph.py). It returns
`prompt_ids`, `completion_ids`, `logprobs`, `env_mask`, and for the reward functions `env_reward` (the return),
`env_rewards` (per step), `env_info` (the last info), `env_steps` and `env_error` (None, or why the env failed:
that episode ends, training goes on).

Identical prompts (a GRPO group) play one task. Where the environment scores groups itself (score_group, on the
server), each run of identical prompts is one group, played on one connection; `env_group_reward` holds what the
server's score gave each member (None where there is none, or the group's scoring failed, with `env_error`
saying why), and `env_reward` (the reward function) gives it.

A task sampler (`sampler=`, openenv_gym.sampling) chooses each group's task instead of the prompts (each run of
identical prompts, as many as the sampler's group size, is a group: `dataset(size, sampled=True)` makes rows that
only set the prompt), and is given each group's rewards (and costs: the tokens the model wrote, or the env's
seconds) when its episodes end.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Coroutine
from typing import Any, TypeVar

from openenv_gym.client.sync import Runner, current_runner
from openenv_gym.client.vector import AsyncVectorClient
from openenv_gym.episode.groups import GROUP_OPTION
from openenv_gym.episode.state import cost_unit, env_seconds, seconds_asked
from openenv_gym.episode.toolcalls import parse_tool_call
from openenv_gym.errors import EnvError
from openenv_gym.integrations.trl import lifecycle
from openenv_gym.integrations.trl.chat import ChatTokens
from openenv_gym.integrations.trl.generation import Generator, generator_for, tokenizer_of
from openenv_gym.integrations.trl.tasks import task_of_prompt
from openenv_gym.rollout.turns import Reply, ToolCall, episode_tools, observation_message
from openenv_gym.targets import Target, resolve

T = TypeVar("T")


def env_reward(completions: list[Any], env_reward: list[float], env_error: list[str | None] | None = None,
               env_group_reward: list[float | None] | None = None, **kwargs: Any) -> list[float | None]:
    """The reward function of make_rollout_func: each episode's return, as the env gave it, or its group reward
    where the env scores groups; None for an episode whose env failed, which TRL (1.16) leaves out of its group's
    baseline, with no advantage of its own."""
    errors = env_error or [None] * len(env_reward)
    grouped = env_group_reward or [None] * len(env_reward)
    return [None if error is not None else float(r if g is None else g)
            for r, g, error in zip(env_reward, grouped, errors, strict=True)]


class _Episode:
    """One prompt's episode: its tokens so far and what the env said."""

    __slots__ = ("completion", "done", "ended", "error", "faithful", "info", "logprobs", "mask", "pending", "prompt",
                 "rewards", "written")

    def __init__(self, prompt: list[int], info: dict[str, Any], error: str | None) -> None:
        self.prompt = prompt
        self.error = error  # why the env failed, if it did
        self.completion: list[int] = []
        self.mask: list[int] = []
        self.logprobs: list[float] = []
        self.rewards: list[float] = []
        self.info = info
        self.done = False
        self.ended = False  # the env ended it (terminated or truncated): a group member the server keeps
        self.pending: dict[str, Any] | None = None  # the env's last message, tokenized at the next turn
        # the program behind the env still goes on from its first request (info["turn"]): once it starts a branch
        # of its own (a compaction, a sub-agent, a retry), what the model writes was asked in another context than
        # these tokens, and is not trained on (env_mask 0)
        self.faithful = True
        self.written = 0  # the tokens the model wrote (a sampler's cost in tokens)

    def add(self, ids: list[int], logprobs: list[float] | None, from_model: bool) -> None:
        self.completion += ids
        self.mask += [int(from_model)] * len(ids)
        self.logprobs += logprobs if logprobs is not None else [0.0] * len(ids)


class EnvRolloutFunc:
    """rollout_func(prompts, trainer) -> dict, over one vector client kept open between calls."""

    def __init__(self, target: Target, max_turns: int, system_prompt: str | None,
                 generate: Generator | None = None, sampler: Any = None) -> None:
        self.target = target
        self.sampler = sampler
        self.tasks: list[dict[str, Any]] = []  # this call's groups' tasks, as the sampler gave them
        self.max_turns = max_turns
        self.system_prompt = system_prompt
        self.generate = generate
        self.timings: dict[str, float] = {}  # the last call's seconds: waiting on the env, and generating
        self.client: AsyncVectorClient | None = None
        self.calls = 0  # names this call's groups
        self.runner = current_runner()
        lifecycle.track(self)

    def __reduce__(self) -> tuple:
        """Pickled by recipe (the env, its servers and the settings), for a trainer's worker process: its client and
        loop belong to this process, and the copy opens its own on first call."""
        return _rebuilt, (self.target.env_id, self.target.settings(), self.max_turns, self.system_prompt,
                          self.generate, self.sampler)

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, Any]:
        lifecycle.attach(trainer)
        self._follow(current_runner())
        self.timings = {"env_s": 0.0, "generate_s": 0.0}
        self.calls += 1
        size = _run_length(prompts)
        client = self._client(len(prompts), size)
        self._sample(len(prompts), size)
        chat = ChatTokens(tokenizer_of(trainer), trainer.chat_template_kwargs)
        first = self._reset(client, prompts)
        tools = [episode_tools(first.infos[k], client.description) for k in range(len(prompts))]
        episodes = []
        for k, prompt in enumerate(prompts):
            messages = self._messages(prompt, first.obs[k])
            error = first.errors.get(k)
            episodes.append(_Episode(chat.prompt_ids(messages, tools[k]), first.infos[k],
                                     None if error is None else f"{type(error).__name__}: {error}"))
        generate = self.generate or generator_for(trainer)
        self._play(client, episodes, generate, trainer.max_completion_length, chat, tools)
        group_rewards = self._score_groups(client, prompts, episodes)
        self._give_back(episodes, group_rewards)
        return {
            "prompt_ids": [e.prompt for e in episodes],
            "completion_ids": [e.completion for e in episodes],
            "logprobs": [e.logprobs for e in episodes],
            "env_mask": [e.mask for e in episodes],
            "env_reward": [float(sum(e.rewards)) for e in episodes],
            "env_rewards": [e.rewards for e in episodes],
            "env_steps": [len(e.rewards) for e in episodes],
            "env_info": [e.info for e in episodes],
            "env_error": [e.error for e in episodes],
            "env_group_reward": group_rewards,
        }

    def _client(self, num_envs: int, group_size: int) -> AsyncVectorClient:
        """The vector client of `num_envs` sessions, opened on first use (again if the batch or group size changed);
        each run of `group_size` envs on one connection (a group the server scores)."""
        client = self.client
        if client is None or client.num_envs != num_envs or client.align != group_size or not client.transports:
            self._close()
            # one connection per server process: each turn is one lock-step batch, a frame each way per connection
            self.client = self.runner.open_client(self.target.open_vector_client(num_envs, 1, align=group_size))
        return self.client

    def _reset(self, client: AsyncVectorClient, prompts: list[Any]) -> Any:
        """Reset every env on its prompt's task, in one batch. A failed reset is in the result's errors, its
        observation says what went wrong."""
        seeds, options = [], []
        scored = self._server_scores(client)
        for k, prompt in enumerate(prompts):
            seed, task = (None, self.tasks[k // client.align]) if self.tasks else task_of_prompt(prompt)
            seeds.append(seed)
            options.append(self.target.options | task)
            if scored:
                member = {"id": self._group_of(k, client), "member": k % client.align}
                options[-1] = options[-1] | {GROUP_OPTION: member}

        async def reset() -> Any:
            client.send_reset(None, seeds, options, together=True)
            return await client.gather(list(range(len(prompts))))

        return self._env(reset())

    # -- a sampler's groups: each run of identical prompts ------------------------------------------------

    def _sample(self, count: int, size: int) -> None:
        """The task of each of this call's groups, from the sampler (none: the prompts' own)."""
        if self.sampler is None:
            return
        if size != self.sampler.group_size or count % size:
            raise ValueError(f"the sampler plays groups of {self.sampler.group_size}, but the trainer's prompts come "
                             f"in runs of {size}: make the trainer's num_generations the sampler's group_size, and "
                             "give each row its own prompt (dataset(size, sampled=True))")
        self.tasks = self.sampler.sample(count // size)

    def _give_back(self, episodes: list[_Episode], group_rewards: list[float | None]) -> None:
        """Each group's rewards (its members' whose env did not fail) and costs to the sampler."""
        unit = cost_unit(self.sampler)
        size = len(episodes) // len(self.tasks) if self.tasks else 0
        for g, task in enumerate(self.tasks):
            members = [k for k in range(g * size, (g + 1) * size) if episodes[k].error is None]
            rewards = [sum(episodes[k].rewards) if group_rewards[k] is None else group_rewards[k] for k in members]
            if not rewards:
                continue
            costs = None
            if unit == "tokens":
                costs = [float(episodes[k].written) for k in members]
            elif unit == "seconds":
                costs = [env_seconds(episodes[k].info) for k in members]
            self.sampler.update(task, rewards, costs)
        self.tasks = []

    # -- groups the server scores: each run of identical prompts ---------------------------------------

    @staticmethod
    def _server_scores(client: AsyncVectorClient) -> bool:
        return bool(client.description.get("group_scoring")) and client.num_envs % client.align == 0

    def _group_of(self, env: int, client: AsyncVectorClient) -> str:
        return f"{self.calls}.{env // client.align}"

    def _score_groups(self, client: AsyncVectorClient, prompts: list[Any],
                      episodes: list[_Episode]) -> list[float | None]:
        """Each member's group reward, where the server scores groups; a group whose scoring fails marks each
        of its members' env_error."""
        rewards: list[float | None] = [None] * len(prompts)
        if not self._server_scores(client):
            return rewards
        size = client.align
        leaders = range(0, len(prompts), size)

        async def score(leader: int) -> Any:
            kept = sum(episodes[k].ended for k in range(leader, leader + size))
            if not kept:
                raise EnvError("every member of the group failed")
            return await client.score_group(client.place_of(leader), self._group_of(leader, client), kept)

        async def every() -> list[Any]:
            return await asyncio.gather(*(score(leader) for leader in leaders), return_exceptions=True)

        for leader, outcome in zip(leaders, self._env(every()), strict=True):
            for k in range(leader, leader + size):
                if isinstance(outcome, BaseException):
                    episodes[k].error = episodes[k].error or f"group score: {type(outcome).__name__}: {outcome}"
                elif episodes[k].ended:
                    rewards[k] = outcome.of(k - leader)[0]  # type: ignore[index]
                elif episodes[k].error is None:  # no score of its own, none of its group: left out of the baseline
                    episodes[k].error = "the episode did not end within max_turns, so its group did not score it"
        return rewards

    def _messages(self, prompt: Any, observation: str) -> list[dict[str, Any]]:
        """The prompt (text or messages) with the env's first observation appended to its last user message."""
        messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else [dict(m) for m in prompt]
        if messages and messages[-1]["role"] == "user" and isinstance(messages[-1]["content"], str):
            messages[-1]["content"] += observation
        else:
            messages.append({"role": "user", "content": observation})
        if self.system_prompt and messages[0]["role"] != "system":
            messages.insert(0, {"role": "system", "content": self.system_prompt})
        return messages

    def _play(self, client: AsyncVectorClient, episodes: list[_Episode], generate: Generator, budget: int,
              chat: ChatTokens, tools: list[list[dict[str, Any]]]) -> None:
        """Turns until every episode is done or max_turns: all running episodes generate, then step together."""
        for turn in range(self.max_turns):
            playing = self._players(episodes, chat, budget)
            if not playing:
                return
            written = self._model_turn(episodes, playing, generate, budget)
            playing = [k for k in playing if not episodes[k].done]
            if not playing:
                return
            actions = [chat.tokenizer.decode(written[k], skip_special_tokens=True) for k in playing]
            result = self._env(client.step(actions, playing))
            for j, k in enumerate(playing):
                episode = episodes[k]
                episode.rewards.append(float(result.rewards[j]))
                episode.info = result.infos[j]
                linked = episode.info.get("turn")  # (the program's next request, in its turn graph)
                if isinstance(linked, dict) and linked.get("kind") not in ("start", "continues"):
                    episode.faithful = False
                error = result.errors.get(k)
                if error is not None:
                    episode.error = f"{type(error).__name__}: {error}"
                episode.ended = error is None and bool(result.terminated[j] or result.truncated[j])
                episode.done = episode.ended or error is not None
                if not episode.done and turn + 1 < self.max_turns:
                    episode.pending = observation_message(result.obs[j], _reply_of(actions[j], tools[k]))

    @staticmethod
    def _players(episodes: list[_Episode], chat: ChatTokens, budget: int) -> list[int]:
        """The episodes that play this turn, with the env's last answer appended as tokens (an answer that does
        not fit the completion budget ends its episode)."""
        playing = []
        for k, episode in enumerate(episodes):
            if episode.done:
                continue
            if episode.pending is not None:
                ids = chat.message_ids(episode.pending)
                episode.pending = None
                if len(episode.completion) + len(ids) >= budget:
                    episode.done = True
                    continue
                episode.add(ids, None, from_model=False)
            playing.append(k)
        return playing

    def _model_turn(self, episodes: list[_Episode], playing: list[int], generate: Generator,
                    budget: int) -> dict[int, list[int]]:
        """One generation for every playing episode, within the budget; the ids each wrote. An episode whose env
        failed takes this turn (TRL needs a completion) and is done."""
        room = max(budget - len(episodes[k].completion) for k in playing)
        started = time.perf_counter()
        samples = generate([episodes[k].prompt + episodes[k].completion for k in playing], room)
        self.timings["generate_s"] += time.perf_counter() - started
        written = {}
        for k, (ids, logprobs) in zip(playing, samples, strict=True):
            left = budget - len(episodes[k].completion)
            written[k] = ids[:left]
            episodes[k].written += len(written[k])
            episodes[k].add(ids[:left], logprobs[:left], from_model=episodes[k].faithful)
            episodes[k].done = episodes[k].error is not None
        return written

    def _env(self, work: Coroutine[Any, Any, T]) -> T:
        started = time.perf_counter()
        try:
            return self.runner.run(work)
        finally:
            self.timings["env_s"] += time.perf_counter() - started

    def _follow(self, runner: Runner) -> None:
        """Run on the runner of where this call is made: a function made in plain code and called inside a running
        loop (an async script, a notebook) moves to the background loop, its old client closed if that can be done
        from here (else its loop closes it at exit)."""
        if runner is self.runner:
            return
        self._close()
        self.client, self.runner = None, runner

    def _close(self) -> None:
        client, self.client = self.client, None
        if client is not None and self.runner.usable():
            self.runner.run(client.close())


def _reply_of(text: str, tools: list[dict[str, Any]]) -> Reply:
    """The turn as the env read it: a tool call written in the text (for an env with tools), or plain text."""
    call = parse_tool_call(text) if tools else None
    return Reply(text, [ToolCall(call["name"], call["arguments"])] if call else [])


def make_rollout_func(env_id: str, *, max_turns: int = 8, system_prompt: str | None = None,
                      generate: Generator | None = None, workers: int | None = None, sampler: Any = None,
                      **make_kwargs: Any) -> EnvRolloutFunc:
    """A rollout_func for GRPOTrainer that plays `env_id`, at most `max_turns` model turns per episode.

    Each prompt's task comes from the prompt (see tasks.task_of_prompt; `dataset()` writes it there): identical
    prompts, as GRPO repeats them, play the same task. Pair it with the `env_reward` reward function.
    generate: another engine, `generate(sequences, max_new_tokens) -> [(ids, logprobs), ...]` (default: the
    trainer's vLLM server or model).
    sampler: a task sampler (openenv_gym.sampling) that chooses each group's task instead of the prompts.
    make_kwargs: what gym.make takes for `env_id` (base_url, token, options, env_args, ...); without base_url a
    local server is started now.
    """
    if max_turns < 1:
        raise ValueError(f"max_turns must be at least 1, got {max_turns}")
    if asked := seconds_asked(sampler):  # the server measures them when asked
        make_kwargs["options"] = (make_kwargs.get("options") or {}) | asked
    return EnvRolloutFunc(resolve(env_id, workers=workers, **make_kwargs), max_turns, system_prompt, generate,
                          sampler)


def _rebuilt(env_id: str, settings: dict[str, Any], max_turns: int, system_prompt: str | None,
             generate: Generator | None, sampler: Any) -> EnvRolloutFunc:
    return make_rollout_func(env_id, max_turns=max_turns, system_prompt=system_prompt, generate=generate,
                             sampler=sampler, **settings)


def _run_length(prompts: list[Any]) -> int:
    """How many identical prompts come in a row (TRL repeats each prompt num_generations times): the group size,
    where every run has that length; else 1."""
    keys = [json.dumps(prompt, sort_keys=True, default=str) for prompt in prompts]
    size = next((k for k in range(1, len(keys)) if keys[k] != keys[0]), len(keys))
    runs_agree = len(keys) % size == 0 and all(keys[k] == keys[k - k % size] for k in range(len(keys)))
    return size if runs_agree else 1

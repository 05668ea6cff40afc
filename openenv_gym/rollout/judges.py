"""An LLM judge that scores a whole group at once: the G attempts at one task, compared side by side.

    judge = GroupJudge("http://127.0.0.1:8000/v1", "Qwen/Qwen3-8B")
    scores = await judge.score("Sort these words: ...", ["attempt 1", "attempt 2", ...])   # each in [0, 1]
    await judge.score_group(group)       # a rollouts(group_size=G) Group: each episode's group_reward
    GRPOTrainer(..., reward_funcs=[judge])   # a TRL reward function: a group is a run of identical prompts

The judge sees every attempt of the group in one request (the prompt below, JUDGE_PROMPT, which you may replace)
and answers with JSON, `{"scores": [s1, ..., sG]}`, each from 0 to 10, in the attempts' order; they are divided
by 10. A judge answer that is not that (not JSON, another number of scores) fails its group only: its members get
no score (None, which TRL leaves out of the baseline) and the reason, naming the judge.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from typing import Any

import orjson

from openenv_gym.client.sync import current_runner
from openenv_gym.rollout.groups import Group
from openenv_gym.rollout.openai import OpenAIPolicy

JUDGE_PROMPT = """You compare several attempts at the same task. Judge each attempt on how well it does the task:
correct beats incorrect, complete beats partial, and among equals the clearer and shorter one is better. Score each
from 0 (useless) to 10 (perfect), comparing the attempts with each other.
Reply with JSON only, the scores in the attempts' order: {"scores": [s1, s2, ...]}"""
_JSON_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


class GroupJudgeError(ValueError):
    """The judge's answer is not a score for each attempt."""


class GroupJudge:
    """Scores the attempts of one group together, with a model behind an OpenAI-compatible server."""

    __name__ = "group_judge"  # what TRL logs a reward function as

    def __init__(self, base_url: str, model: str, *, prompt: str = JUDGE_PROMPT, api_key: str | None = None,
                 max_concurrency: int = 16, **policy_options: Any) -> None:
        self.prompt = prompt
        self.model = OpenAIPolicy(base_url, model, api_key=api_key, max_concurrency=max_concurrency,
                                  logprobs=False, token_ids=False, **policy_options)

    async def score(self, task: str, attempts: Sequence[str]) -> list[float]:
        """Each attempt's score in [0, 1]; GroupJudgeError if the judge answers otherwise."""
        shown = "\n\n".join(f"Attempt {k}:\n{attempt}" for k, attempt in enumerate(attempts, 1))
        messages = [{"role": "system", "content": self.prompt},
                    {"role": "user", "content": f"Task:\n{task}\n\n{shown}"}]
        reply = await self.model(messages, [])
        return parse_scores(reply.text or "", len(attempts))

    async def score_group(self, group: Group) -> list[float | None]:
        """Score a rollouts() group: each good member's `group_reward`; failed members, and every member when the
        judge fails, get None (and the judge's failure in info["group_error"])."""
        good = [episode for episode in group.episodes if episode.error is None]
        task = next((m.get("content") or "" for m in group.episodes[0].messages if m.get("role") == "user"), "")
        try:
            scores = await self.score(task, [_attempt(episode.messages) for episode in good]) if good else []
        except Exception as exc:  # the judge failed this group only
            for episode in group.episodes:
                episode.info["group_error"] = f"{self.__name__}: {type(exc).__name__}: {exc}"
            return [None] * len(group.episodes)
        by_episode = {id(episode): value for episode, value in zip(good, scores, strict=True)}
        for episode in group.episodes:
            episode.group_reward = by_episode.get(id(episode))
        return [episode.group_reward for episode in group.episodes]

    def __call__(self, prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float | None]:
        """TRL's reward function: the completions of each run of identical prompts (a GRPO group) judged together;
        a group the judge fails gets None."""
        return current_runner().run(self._score_runs(prompts, completions))

    async def _score_runs(self, prompts: list[Any], completions: list[Any]) -> list[float | None]:
        runs: list[tuple[int, int]] = []  # (start, stop) of each run of identical prompts
        for index, prompt in enumerate(prompts):
            if runs and prompts[runs[-1][0]] == prompt:
                runs[-1] = (runs[-1][0], index + 1)
            else:
                runs.append((index, index + 1))

        async def judged(start: int, stop: int) -> list[float | None]:
            try:
                return list(await self.score(_text(prompts[start]), [_text(c) for c in completions[start:stop]]))
            except Exception:
                return [None] * (stop - start)
        scored = await asyncio.gather(*(judged(start, stop) for start, stop in runs))
        return [value for run in scored for value in run]

    async def aclose(self) -> None:
        await self.model.aclose()


def parse_scores(text: str, count: int) -> list[float]:
    found = _JSON_OBJECT.search(text)
    try:
        scores = orjson.loads(found.group(0))["scores"] if found else None
    except (orjson.JSONDecodeError, TypeError, KeyError):
        scores = None
    if not isinstance(scores, list) or not all(isinstance(s, int | float) and not isinstance(s, bool)
                                               for s in scores):
        raise GroupJudgeError(f"the judge did not answer {{\"scores\": [...]}} with numbers: {text[:200]!r}")
    if len(scores) != count:
        raise GroupJudgeError(f"the judge gave {len(scores)} scores for {count} attempts")
    return [min(max(float(s) / 10, 0.0), 1.0) for s in scores]


def _attempt(messages: list[dict[str, Any]]) -> str:
    """What an episode did: its conversation after the first user message."""
    first = next((k for k, m in enumerate(messages) if m.get("role") == "user"), -1)
    return "\n".join(f"{m.get('role')}: {_text(m.get('content'))}" for m in messages[first + 1:])


def _text(value: Any) -> str:
    """A prompt or completion as TRL gives it (text, or chat messages) as text."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(_text(item.get("content")) if isinstance(item, dict) else str(item) for item in value)
    return "" if value is None else str(value)

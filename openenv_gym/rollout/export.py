"""The exact training export: one record per branch of an episode's model turns, with the tokens as the model
server gave them, never re-tokenized and never filled in.

A branch's record is trainable (`purpose: "train"`) when its tokens are faithful:
- `prompt_token_ids`: its first turn's prompt;
- `completion_token_ids`: every token after it, each turn's sampled tokens (`loss_mask` 1, their `logprobs` as
  the server gave them) and the context between turns, the tokens the next prompt adds (the env's answer: 0, with
  a logprob of 0.0 that is never trained on);
- the episode's `reward`, its per-step `rewards`, and its `advantage` in its group.

Anything else is exported for evaluation only (`purpose: "eval"`, with the `reason` and the messages), and counted:
a turn without token ids or a logprob per sampled token; a prompt that does not begin with the turns before it (the
conversation was rendered again: a message the endpoint rewrote); a branch off the first one (a retry, a sub-agent, a
compaction: what the model wrote there was asked in another context); an episode that failed.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from openenv_gym.rollout.records import Episode

TRAIN, EVAL = "train", "eval"
EXPORTS = (TRAIN,)  # what `record=` / `--export` take


def training_records(episode: Episode) -> list[dict[str, Any]]:
    """The records of an episode's branches (none for an episode without a model turn)."""
    branches: dict[int, list[int]] = {}
    for k in range(len(episode.tokens)):
        node = episode.turns[k] if k < len(episode.turns) else {}
        branches.setdefault(int(node.get("branch", 0)), []).append(k)
    records = []
    for branch, turns in branches.items():
        record = _identity(episode) | {"branch": branch, "turns": turns}
        tokens, reason = _tokens(episode, turns)
        if reason is None and branch != 0:
            kind = episode.turns[turns[0]].get("kind", "branch")
            reason = f"a branch off the first one ({kind}): what the model wrote there was asked in another context"
        if reason is None and episode.error is not None:
            reason = f"the episode failed: {episode.error}"
        records.append(record | ({"purpose": TRAIN} | tokens if reason is None else
                                 {"purpose": EVAL, "reason": reason, "messages": episode.messages}))
    return records


def _identity(episode: Episode) -> dict[str, Any]:
    return {"env_index": episode.env_index, "seed": episode.seed, "options": episode.options, "group": episode.group,
            "group_member": episode.group_member, "reward": episode.total_reward, "rewards": episode.rewards,
            "advantage": episode.advantage}


def _tokens(episode: Episode, turns: list[int]) -> tuple[dict[str, Any], str | None]:
    """The branch's tokens, or why they are not faithful."""
    prompt: list[int] | None = None
    completion: list[int] = []
    logprobs: list[float] = []
    mask: list[int] = []
    for k in turns:
        turn = episode.tokens[k]
        if turn.prompt_ids is None or turn.completion_ids is None:
            return {}, f"turn {k} has no token ids (the model server gave none)"
        if turn.logprobs is None or len(turn.logprobs) != len(turn.completion_ids):
            return {}, f"turn {k} has no logprob for each sampled token"
        if prompt is None:
            prompt = list(turn.prompt_ids)
        else:
            so_far = len(prompt) + len(completion)
            if turn.prompt_ids[:len(prompt)] != prompt or turn.prompt_ids[len(prompt):so_far] != completion:
                return {}, (f"turn {k}'s prompt does not begin with the turns before it: the conversation was rendered "
                            "again (a message the endpoint rewrote)")
            context = turn.prompt_ids[so_far:]
            completion += context
            logprobs += [0.0] * len(context)
            mask += [0] * len(context)
        completion += turn.completion_ids
        logprobs += turn.logprobs
        mask += [1] * len(turn.completion_ids)
    return {"prompt_token_ids": prompt, "completion_token_ids": completion, "logprobs": logprobs,
            "loss_mask": mask}, None


class ExportSummary:
    """How many records of each purpose a run exported, and why those for evaluation only are."""

    def __init__(self) -> None:
        self.purposes: Counter[str] = Counter()
        self.reasons: Counter[str] = Counter()

    def add(self, records: list[dict[str, Any]]) -> None:
        for record in records:
            self.purposes[record["purpose"]] += 1
            if record["purpose"] == EVAL:
                self.reasons[_kind_of(record["reason"])] += 1

    def lines(self) -> list[str]:
        said = [f"export {TRAIN} records {self.purposes[TRAIN]}, {EVAL} records {self.purposes[EVAL]}"]
        return said + [f"export {EVAL}: {count} x {reason}" for reason, count in self.reasons.most_common()]


def _kind_of(reason: str) -> str:
    """A reason without its turn number or error message, to count alike ones together."""
    return re.sub(r"\bturn \d+", "turn k", reason).partition(": ")[0]

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
compaction: what the model wrote there was asked in another context); an episode that failed; an agent program
whose own ATIF trajectory counts other tokens than the model server gave, turn by turn, or other model calls
(episode/atif.py: the counts come in the final info's "atif").
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from openenv_gym.episode.atif import INFO_KEY as ATIF
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
    disagreement = _reconciled(episode)
    for branch, turns in branches.items():
        record = _identity(episode) | {"branch": branch, "turns": turns}
        tokens, reason = _tokens(episode, turns)
        reason = reason or disagreement
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


def _reconciled(episode: Episode) -> str | None:
    """Where the agent's own trajectory disagrees with the model server's tokens, turn by turn (None: it agrees, or
    the program wrote none)."""
    atif = episode.info.get(ATIF)
    if not isinstance(atif, dict):
        return None
    if "error" in atif:
        return f"the agent's ATIF trajectory cannot be reconciled: {atif['error']}"
    counted = sum(call["calls"] for call in atif["calls"])
    if counted != len(episode.tokens):
        return (f"the agent's ATIF trajectory disagrees on the model calls: it counts {counted}, the episode has "
                f"{len(episode.tokens)} turns")
    turn = 0
    for call in atif["calls"]:
        turns = episode.tokens[turn:turn + call["calls"]]
        for count, ids in (("prompt_tokens", "prompt_ids"), ("completion_tokens", "completion_ids")):
            given = [getattr(t, ids) for t in turns]
            if count in call and None not in given and call[count] != sum(map(len, given)):
                return (f"the agent's ATIF trajectory disagrees at turn {turn}: {_step_of(call)} counts {call[count]} "
                        f"{count.replace('_', ' ')}, the model server gave {sum(map(len, given))}")
        turn += call["calls"]
    return None


def _step_of(call: dict[str, Any]) -> str:
    return f"its step {call['step']}" + (f" of {call['trajectory']}" if "trajectory" in call else "")


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

"""The exact training export (rollout/export.py): records checked token for token against what a scripted model
server returned, and every reason an episode is exported for evaluation only."""

import asyncio
import json
import subprocess
import sys

import pytest
from openai_server import ScriptedServer

from openenv_gym import OpenAIPolicy, rollouts
from openenv_gym.rollout.export import training_records
from openenv_gym.rollout.records import Episode, TurnTokens


def _played(url, model_url, model, record="train", **kwargs):
    async def main():
        policy = OpenAIPolicy(model_url, model)
        return [e async for e in rollouts("openenv/guess", policy, num_envs=1, base_url=url, record=record,
                                          **kwargs)]
    return asyncio.run(main())


def test_each_record_is_the_model_servers_tokens_turn_by_turn(guess_url):
    """One env plays in turn, so the server's answers are the episodes' turns in order: each record's sampled
    tokens (loss mask 1) are the completions it returned, with their logprobs, and the whole sequence is the last
    prompt and completion; the context between them (the env's answers) is masked out."""
    with ScriptedServer() as model:
        episodes = _played(guess_url, model.url, "bytes", episodes=3, seed=1, max_turns=6)
        answers = list(model.answers)
    assert sum(len(e.tokens) for e in episodes) == len(answers) and all(len(e.tokens) > 2 for e in episodes)
    for episode in episodes:
        turns, answers = answers[:len(episode.tokens)], answers[len(episode.tokens):]
        [record] = episode.training
        assert record["purpose"] == "train" and record["turns"] == list(range(len(turns)))
        assert record["reward"] == episode.total_reward and record["rewards"] == episode.rewards
        prompt, completion, mask = record["prompt_token_ids"], record["completion_token_ids"], record["loss_mask"]
        assert prompt == turns[0][0]
        assert prompt + completion == turns[-1][0] + turns[-1][1]  # the whole conversation, as the server had it
        assert len(completion) == len(mask) == len(record["logprobs"])
        sampled = [k for k, m in enumerate(mask) if m == 1]
        assert [completion[k] for k in sampled] == [t for _, ids, _ in turns for t in ids]
        assert [record["logprobs"][k] for k in sampled] == [v for _, _, values in turns for v in values]
        context = bytes(completion[k] for k, m in enumerate(mask) if m == 0).decode()
        assert context.count("<tool>") == context.count("<assistant>") == len(turns) - 1  # the env's, between turns
        assert all(record["logprobs"][k] == 0.0 for k, m in enumerate(mask) if m == 0)


def test_a_rewritten_conversation_is_exported_for_evaluation_with_the_turn(guess_url):
    """The template leaves the model's thinking out of the history: the second prompt does not begin with the
    first turn's tokens, so the episode's tokens are not what the model was trained to continue."""
    with ScriptedServer() as model:
        [episode] = _played(guess_url, model.url, "bytes-rewrite", episodes=1, seed=1, max_turns=4)
    [record] = episode.training
    assert record["purpose"] == "eval" and "prompt_token_ids" not in record
    assert record["reason"].startswith("turn 1's prompt does not begin with the turns before it")
    assert record["messages"] == episode.messages


def test_turns_without_tokens_branches_and_failures_are_for_evaluation():
    def episode(tokens, turns=(), error=None):
        return Episode(0, 1, {}, tokens=list(tokens), turns=list(turns), error=error, rewards=[1.0])

    whole = TurnTokens([1, 2], [3], [-0.1])
    following = TurnTokens([1, 2, 3, 9], [4, 5], [-0.2, -0.3])
    [record] = training_records(episode([whole, following]))
    assert (record["prompt_token_ids"], record["completion_token_ids"], record["loss_mask"], record["logprobs"]) == (
        [1, 2], [3, 9, 4, 5], [1, 0, 1, 1], [-0.1, 0.0, -0.2, -0.3])
    [record] = training_records(episode([whole, TurnTokens(None, None, None)]))
    assert record["reason"] == "turn 1 has no token ids (the model server gave none)"
    [record] = training_records(episode([TurnTokens([1], [2, 3], [-0.5])]))
    assert record["reason"] == "turn 0 has no logprob for each sampled token"
    graph = [{"turn": 0, "branch": 0, "kind": "start"}, {"turn": 1, "branch": 1, "kind": "sub-agent"},
             {"turn": 2, "branch": 0, "kind": "continues"}]
    main, helper = training_records(episode([whole, TurnTokens([7], [8], [-1.0]), following], graph))
    assert main["purpose"] == "train" and main["turns"] == [0, 2] and main["completion_token_ids"] == [3, 9, 4, 5]
    assert helper["purpose"] == "eval" and helper["turns"] == [1] and "a branch off the first one (sub-agent)" in \
        helper["reason"]
    [record] = training_records(episode([whole], error="env: lost"))
    assert record["reason"] == "the episode failed: env: lost"
    assert training_records(episode([])) == []


def test_the_rollout_command_exports_records_and_counts_those_for_evaluation(tmp_path, guess_url):
    out = tmp_path / "train.jsonl"
    with ScriptedServer() as model:
        for name, model_name in (("train", "bytes"), ("eval", "bytes-rewrite")):
            done = subprocess.run([sys.executable, "-m", "openenv_gym", "rollout", "openenv/guess", "--env-url",
                                   guess_url, "--model-url", model.url, "--model", model_name, "--episodes", "2",
                                   "--group-size", "2", "--seed", "1", "--max-turns", "4", "--export", "train",
                                   "--output", str(out)], capture_output=True, text=True, timeout=300)
            assert done.returncode == 0, done.stderr
            records = [json.loads(line) for line in out.read_text().splitlines()]
            assert len(records) == 4 and {r["purpose"] for r in records} == {name}
            assert all(r["advantage"] is not None and r["group"] for r in records)
            counts = f"export train records {4 if name == 'train' else 0}, eval records {0 if name == 'train' else 4}"
            assert counts in done.stdout
        assert "export eval: 4 x turn k's prompt does not begin with the turns before it" in done.stdout
    refused = subprocess.run([sys.executable, "-m", "openenv_gym", "rollout", "openenv/guess", "--model-url",
                              "http://127.0.0.1:9/v1", "--model", "m", "--episodes", "1", "--export", "train"],
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode == 1 and "give --output" in refused.stderr
    with pytest.raises(ValueError, match="record must be one of train"):
        _played(guess_url, "http://127.0.0.1:9/v1", "m", record="everything")

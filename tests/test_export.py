"""The exact training export (rollout/export.py): records checked token for token against what a scripted model
server returned, and every reason an episode is exported for evaluation only."""

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from openai_server import ScriptedServer

from benchmarks.harbor_runner import HarborRunner
from openenv_gym import OpenAIPolicy, rollouts
from openenv_gym.episode.atif import model_calls
from openenv_gym.rollout.export import training_records
from openenv_gym.rollout.records import Episode, TurnTokens

ATIF_AGENT = Path(__file__).parent / "envs" / "atif_agent"
STYLES = ATIF_AGENT / "styles"


def _played(url, model_url, model, record="train", env="openenv/guess", **kwargs):
    async def main():
        policy = OpenAIPolicy(model_url, model)
        return [e async for e in rollouts(env, policy, num_envs=1, base_url=url, record=record, **kwargs)]
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


def test_an_atif_step_of_several_calls_sums_theirs_and_every_disagreement_is_named():
    turns = [TurnTokens([1, 2], [3], [-0.1]), TurnTokens([1, 2, 3, 9], [4, 5], [-0.2, -0.3])]

    def reason(calls):
        info = {"atif": {"schema_version": "ATIF-v1.7", "calls": calls} if isinstance(calls, list) else calls}
        [record] = training_records(Episode(0, 1, {}, tokens=turns, rewards=[1.0], info=info))
        return record.get("reason")

    assert reason([{"step": 2, "calls": 2, "prompt_tokens": 6, "completion_tokens": 3}]) is None
    assert reason([{"step": 2, "calls": 1, "completion_tokens": 1}, {"step": 3, "calls": 1}]) is None  # (no counts)
    assert reason([{"step": 2, "calls": 1, "prompt_tokens": 2}, {"step": 4, "calls": 1, "trajectory": "helper",
                                                                  "prompt_tokens": 5}]) == (
        "the agent's ATIF trajectory disagrees at turn 1: its step 4 of helper counts 5 prompt tokens, the model "
        "server gave 4")
    assert reason([{"step": 2, "calls": 1}]) == ("the agent's ATIF trajectory disagrees on the model calls: it "
                                                 "counts 1, the episode has 2 turns")
    assert reason({"error": "agent/trajectory.json is not an ATIF trajectory: steps: Field required"}) == (
        "the agent's ATIF trajectory cannot be reconciled: agent/trajectory.json is not an ATIF trajectory: steps: "
        "Field required")


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


# -- an agent's own ATIF trajectory ---------------------------------------------------------------------------

def _harbor_refusals(trajectories: list[str]) -> list[str | None]:
    """What Harbor's own ATIF model (harbor.models.trajectories, the format's oracle) says of each trajectory's
    JSON text: None where it accepts it, else its first error."""
    runner = HarborRunner.ready(Path(os.environ["OPENENV_GYM_VENVS"]) / "harbor-runner")
    check = ("import json, sys\nfrom harbor.models.trajectories import Trajectory\nsaid = []\n"
             "for text in json.load(sys.stdin):\n    try:\n        Trajectory.model_validate_json(text)\n"
             "        said.append(None)\n    except ValueError as exc:\n        said.append(str(exc)[:300])\n"
             "print(json.dumps(said))")
    done = subprocess.run([str(runner.python), "-c", check], input=json.dumps(trajectories), capture_output=True,
                          text=True, timeout=120, check=True)
    return json.loads(done.stdout)


def test_trajectories_of_every_style_give_their_model_calls_as_harbors_model_reads_them():
    """Counts, or token ids to count; copied context and dispatches left out; a step of two calls; an older
    version; sub-agents put among the main agent's calls by their timestamps (two ISO styles)."""
    counts = [{"prompt_tokens": p, "completion_tokens": c} for p, c in ((40, 12), (60, 7), (70, 15), (4, 2))]
    expected = {
        "plain.json": [{"step": 3, "calls": 1, **counts[0]}, {"step": 4, "calls": 1, **counts[1]}],
        "copied_dispatch_multi.json": [{"step": 5, "calls": 2, **counts[2]}],
        "token_ids.json": [{"step": 2, "calls": 1, **counts[3]}],
        "older.json": [{"step": 2, "calls": 1, "prompt_tokens": 3, "completion_tokens": 2}, {"step": 3, "calls": 1}],
        "subagents.json": [{"step": 2, "calls": 1, "prompt_tokens": 20, "completion_tokens": 5},
                           {"step": 2, "calls": 1, "trajectory": "searcher", "prompt_tokens": 11,
                            "completion_tokens": 3},
                           {"step": 3, "calls": 1, "trajectory": "searcher", "prompt_tokens": 18,
                            "completion_tokens": 2},
                           {"step": 3, "calls": 1, "prompt_tokens": 41, "completion_tokens": 6}]}
    for name, calls in expected.items():
        assert model_calls((STYLES / name).read_bytes())["calls"] == calls, name
    # what cannot be reconciled says why: no ATIF at all (Harbor refuses it too), and sub-agents' calls without
    # timestamps, which Harbor accepts but nothing can put in order
    assert "is not an ATIF trajectory" in model_calls((STYLES / "not_atif.json").read_bytes())["error"]
    assert "without ISO 8601 timestamps" in model_calls((STYLES / "subagents_untimed.json").read_bytes())["error"]
    assert "is not an ATIF trajectory: the file: Invalid JSON" in model_calls(b"{")["error"]
    names = sorted(path.name for path in STYLES.glob("*.json"))
    refusals = dict(zip(names, _harbor_refusals([(STYLES / name).read_text() for name in names]), strict=True))
    assert [name for name, said in refusals.items() if said] == ["not_atif.json"]


def test_an_agents_own_trajectory_is_reconciled_with_the_model_servers_tokens_turn_by_turn(tmp_path, start_server):
    """The endpoint reports the model server's counts in each answer's usage, so an agent that records them agrees
    with the export turn by turn: its main branch trains, its sub-agent's is for evaluation; one that counts words
    disagrees at its first call, and its episode is for evaluation only, naming the turn. A link where the
    trajectory goes leads nowhere outside the sandbox (the host's file there is never read)."""
    planted = tmp_path / "trajectory.json"
    planted.write_bytes((STYLES / "plain.json").read_bytes())
    url = start_server(str(ATIF_AGENT))
    with ScriptedServer() as model:
        honest, miscounting, linked = _played(url, model.url, "bytes", env="openenv/remote", episodes=3, tasks=[
            {"index": 0}, {"index": 1}, {"task_spec": {"prompt": "Say hi.", "link": str(planted)}}])
        answers = list(model.answers)
    assert all(e.error is None for e in (honest, miscounting, linked)) and len(answers) == 9
    usage = [{"prompt_tokens": len(prompt), "completion_tokens": len(completion)} for prompt, completion, _ in answers]
    assert honest.info["atif"] == {"schema_version": "ATIF-v1.7", "calls": [
        {"step": 3, "calls": 1, **usage[0]}, {"step": 1, "calls": 1, "trajectory": "helper", **usage[1]},
        {"step": 5, "calls": 1, **usage[2]}]}
    main, helper = honest.training
    assert main["purpose"] == "train" and main["turns"] == [0, 2] and main["prompt_token_ids"] == answers[0][0]
    assert main["prompt_token_ids"] + main["completion_token_ids"] == answers[2][0] + answers[2][1]
    assert helper["purpose"] == "eval" and helper["reason"].startswith("a branch off the first one (sub-agent)")
    words = len(bytes(answers[3][1]).decode().split())
    assert {r["purpose"] for r in miscounting.training} == {"eval"}
    assert {r["reason"] for r in miscounting.training} == {
        f"the agent's ATIF trajectory disagrees at turn 0: its step 3 counts {words} completion tokens, the model "
        f"server gave {len(answers[3][1])}"}
    assert "atif" not in linked.info and {r["purpose"] for r in linked.training} == {"train", "eval"}
    assert _harbor_refusals([json.dumps(honest.info["metrics"]["trajectory"])]) == [None]

"""The rollout stream, OpenAIPolicy and `openenv-gym rollout`, against a real local env server and a small
OpenAI-compatible HTTP server with a scripted policy (tests/openai_server.py)."""

import asyncio
import contextlib
import contextvars
import json
import pickle
import subprocess
import sys

import pytest
from conftest import health, run, wait_until
from openai_server import ScriptedServer

from openenv_gym import OpenAIPolicy, Reply, rollouts
from openenv_gym.errors import ModelServerError
from openenv_gym.rollout.openai import reply_of


@pytest.fixture(scope="module")
def model_server():
    with ScriptedServer() as server:
        yield server


async def play(url, policy, **kwargs):
    async with contextlib.aclosing(rollouts("openenv/guess", policy, base_url=url, **kwargs)) as stream:
        return [episode async for episode in stream]


def test_openai_policy_plays_guess_to_the_end(guess_url, model_server):
    async def main():
        policy = OpenAIPolicy(model_server.url, "scripted", max_concurrency=4)
        try:
            return await play(guess_url, policy, num_envs=8, episodes=20, seed=100)
        finally:
            await policy.aclose()

    episodes = run(main())
    assert len(episodes) == 20 and sorted(e.seed for e in episodes) == list(range(100, 120))
    for episode in episodes:
        assert episode.error is None and episode.terminated and not episode.truncated
        assert "correct!" in episode.messages[-1]["content"] and episode.total_reward > 0.2
        assert episode.steps == len(episode.tokens) <= 7  # bisection over 1..100
        assert episode.tokens[0].completion_ids == [7, 50, 8] and episode.tokens[0].logprobs == [-0.5] * 3
        for call, answer in zip(episode.messages[1::2], episode.messages[2::2], strict=True):
            assert answer["role"] == "tool" and answer["tool_call_id"] == call["tool_calls"][0]["id"]
    request = model_server.bodies[-1]
    assert request["tools"][0]["function"]["name"] in {"guess", "divisible_by", "give_up"}
    assert request["logprobs"] is True and request["return_token_ids"] is True
    assert wait_until(lambda: health(guess_url)["sessions"] == 0)


def test_an_openai_policy_used_already_pickles_for_another_process(guess_url, model_server):
    async def main():
        policy = OpenAIPolicy(model_server.url, "scripted", max_concurrency=2)
        try:
            await play(guess_url, policy, num_envs=2, episodes=2, seed=0)
            copy = pickle.loads(pickle.dumps(policy))  # what Ray does to send it to a worker
            try:
                return await play(guess_url, copy, num_envs=2, episodes=2, seed=0)
            finally:
                await copy.aclose()
        finally:
            await policy.aclose()

    assert [e.error for e in run(main())] == [None, None]
    assert wait_until(lambda: health(guess_url)["sessions"] == 0)


def test_model_server_errors_end_only_their_episode(guess_url, model_server):
    async def main(model):
        policy = OpenAIPolicy(model_server.url, model, max_retries=3)
        try:
            return await play(guess_url, policy, num_envs=4, episodes=6, seed=0)
        finally:
            await policy.aclose()

    refused = run(main("broken"))
    assert len(refused) == 6
    assert all(e.error.startswith("policy: ModelServerError") and "answered 400" in e.error for e in refused)
    retried = run(main("flaky"))  # 503 once per conversation: the retry gets through
    assert [e.error for e in retried] == [None] * 6 and all(e.terminated for e in retried)
    assert wait_until(lambda: health(guess_url)["sessions"] == 0)


def test_a_slow_policy_call_holds_back_only_its_own_episode(guess_url):
    async def policy(messages, tools):
        if not policy.slowed:  # the first call of all is a straggler, and plays another move to be told apart
            policy.slowed = True
            await asyncio.sleep(1.5)
            return Reply(text='<tool_call>{"name": "guess", "arguments": {"number": 1}}</tool_call>')
        return Reply(text='<tool_call>{"name": "give_up", "arguments": {}}</tool_call>')
    policy.slowed = False

    async def main():
        return await play(guess_url, policy, num_envs=4, episodes=40, seed=0)

    episodes = run(main())
    straggler = [k for k, e in enumerate(episodes) if '"number": 1' in e.messages[1]["content"]]
    assert len(episodes) == 40 and len(straggler) == 1 and straggler[0] > 30  # the others went on meanwhile


def test_policy_calls_run_each_in_a_context_of_their_own_and_fail_alone(guess_url):
    """Calls run at once until they first wait, as tasks would run them: each in a copy of the caller's context
    (what one sets, before or after it waits, stays its own), and a call that raises at once or returns nonsense
    ends only its own episode."""
    turn = contextvars.ContextVar("turn", default=None)
    leaks, lost, calls = [], [], [0]

    async def policy(messages, tools):
        calls[0] += 1
        mine = calls[0]
        if turn.get() is not None:
            leaks.append(turn.get())  # what another call set
        turn.set(mine)
        if mine % 4 == 0:  # every fourth call waits (a task goes on with it), and must find its own value after
            await asyncio.sleep(0)
            if turn.get() != mine:
                lost.append(mine)
        if mine == 3:
            raise ValueError("the model refused")
        if mine == 5:
            return 42
        return Reply(text='<tool_call>{"name": "give_up", "arguments": {}}</tool_call>')

    async def main():
        episodes = await play(guess_url, policy, num_envs=4, episodes=12, seed=0)
        return episodes, turn.get()

    episodes, after = run(main())
    assert leaks == [] and lost == [] and after is None  # nothing leaked into other calls or the caller
    assert calls[0] >= 12
    errors = sorted(e.error for e in episodes if e.error is not None)
    assert errors == ["policy: TypeError: a policy must return a Reply or a str, got int",
                      "policy: ValueError: the model refused"]
    assert len(episodes) == 12 and all(e.terminated for e in episodes if e.error is None)
    assert wait_until(lambda: health(guess_url)["sessions"] == 0)


def test_breaking_out_or_cancelling_closes_every_session(guess_url, model_server):
    async def main():
        policy = OpenAIPolicy(model_server.url, "slow-50")
        async with contextlib.aclosing(rollouts("openenv/guess", policy, base_url=guess_url,
                                                num_envs=16)) as stream:
            async for _ in stream:
                break
        assert wait_until(lambda: health(guess_url)["sessions"] == 0)
        task = asyncio.ensure_future(play(guess_url, policy, num_envs=16))
        await asyncio.sleep(1.0)
        assert health(guess_url)["sessions"] == 16
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await policy.aclose()

    run(main())
    assert wait_until(lambda: health(guess_url)["sessions"] == 0)


@pytest.mark.parametrize("model", ["thinker", "thinker-0.16"])
def test_a_thinking_models_reasoning_is_kept_in_the_records_and_the_action_stays_a_tool_call(guess_url, model_server,
                                                                                              model):
    """vLLM with a reasoning parser returns the reasoning beside the content (`reasoning_content`; from 0.16,
    `reasoning`): each turn's assistant message keeps it, and its tokens are the turn's; guess, whose actions are tool
    calls, gets the call alone."""
    async def main():
        policy = OpenAIPolicy(model_server.url, model, max_concurrency=2)
        try:
            return await play(guess_url, policy, num_envs=2, episodes=2, seed=7)
        finally:
            await policy.aclose()

    for episode in run(main()):
        assert episode.error is None and episode.terminated
        calls = [message for message in episode.messages if message["role"] == "assistant"]
        assert calls and all(call["reasoning_content"].startswith("The last message says") for call in calls)
        assert all(turn.completion_ids[:2] == [5, 6] for turn in episode.tokens)
        assert json.loads(json.dumps(episode.to_json()))["messages"] == episode.messages  # (its JSON line keeps it)
    assert "reasoning_content" in model_server.bodies[-1]["messages"][-2]  # (sent back with the conversation)


def test_reply_of_reads_tool_calls_tokens_and_refuses_nonsense():
    reply = reply_of({"choices": [{"message": {"content": None, "tool_calls": [
        {"id": "c1", "function": {"name": "guess", "arguments": '{"number": 4}'}},
        {"id": "c2", "function": {"name": "guess", "arguments": "not json"}}]},
        "token_ids": [1, 2], "logprobs": {"content": [{"logprob": -1.0}, {"logprob": -2.0}]}}],
        "prompt_token_ids": [9]})
    assert (reply.text, reply.tool_calls[0].arguments, reply.tool_calls[1].arguments) == (
        "", {"number": 4}, {"_unparsed": "not json"})
    assert (reply.prompt_ids, reply.completion_ids, reply.logprobs) == ([9], [1, 2], [-1.0, -2.0])
    with pytest.raises(ModelServerError, match="no choices"):
        reply_of({"error": "nope"})


def cli(*args):
    return subprocess.run([sys.executable, "-m", "openenv_gym", "rollout", *args], capture_output=True, text=True,
                          timeout=120)


def test_rollout_cli_writes_one_line_per_episode(tmp_path, guess_url, model_server):
    out = tmp_path / "episodes.jsonl"
    done = cli("openenv/guess", "--model-url", model_server.url, "--model", "scripted", "--episodes", "12",
               "--num-envs", "5", "--env-url", guess_url, "--output", str(out))
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == 12 and all(line["terminated"] and line["error"] is None for line in lines)
    assert "12/12" in done.stderr and "mean_reward" in done.stderr  # the progress bar
    summary = dict(line.split(None, 1) for line in done.stdout.splitlines() if line and not line.startswith(" "))
    assert summary["episodes"].strip() == "12" and summary["completed"].strip() == "12"

    failed = cli("openenv/guess", "--base-url", model_server.url, "--model", "broken", "--episodes", "3",
                 "--env-url", guess_url, "--out", str(out))  # the old names still work, and say the new ones
    assert "--base-url is now --model-url" in failed.stderr and "--out is now --output" in failed.stderr
    assert failed.returncode == 1 and "no episode completed" in failed.stderr
    assert "by the policy" in failed.stdout
    errors = [json.loads(line)["error"] for line in out.read_text().splitlines()]
    assert len(errors) == 3 and all(error.startswith("policy: ModelServerError:") for error in errors)
    assert wait_until(lambda: health(guess_url)["sessions"] == 0)

    grouped = cli("openenv/guess", "--model-url", model_server.url, "--model", "scripted", "--episodes", "3",
                  "--group-size", "4", "--env-url", guess_url, "--output", str(out))
    assert grouped.returncode == 0, grouped.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    by_group: dict[str, list] = {}
    for line in lines:
        by_group.setdefault(line["group"], []).append(line)
    assert len(lines) == 12 and len(by_group) == 3 and all(len(members) == 4 for members in by_group.values())
    for members in by_group.values():
        assert len({m["seed"] for m in members}) == 1 and all(m["group_complete"] for m in members)
        assert sum(m["advantage"] for m in members) == pytest.approx(0.0, abs=1e-9)


def test_an_env_that_cannot_reset_stops_the_stream_with_its_error(faulty_url):
    from openenv_gym.errors import EnvError

    async def policy(messages, tools):
        return "hello"

    async def main():  # any id with base_url reaches a running server; openenv/ors's one is switched to native
        async with contextlib.aclosing(rollouts("openenv/ors", policy, base_url=faulty_url, transport="native",
                                                num_envs=2, options={"fail": True})) as stream:
            return [episode async for episode in stream]

    with pytest.raises(EnvError, match=r"resets in a row failed, the last with: .*reset failed on purpose"):
        run(main())
    assert wait_until(lambda: health(faulty_url)["sessions"] == 0)


def bisecting(messages, tools):
    """Plays guess to the end: bisects the range the env states (guess's observations name low and high)."""
    import re

    numbers = [int(n) for n in re.findall(r"\d+", messages[-1]["content"])]
    low, high = (numbers[-2], numbers[-1]) if len(numbers) >= 2 else (1, 100)
    middle = (low + high) // 2
    return Reply(text=f'<tool_call>{{"name": "guess", "arguments": {{"number": {middle}}}}}</tool_call>')


def test_groups_play_one_task_g_times_and_come_with_advantages(guess_url):
    async def policy(messages, tools):
        return bisecting(messages, tools)

    groups = run(play(guess_url, policy, num_envs=6, episodes=3, group_size=4))
    assert len(groups) == 3 and all(group.complete and len(group.episodes) == 4 for group in groups)
    for group in groups:
        seeds = {episode.seed for episode in group.episodes}
        firsts = {episode.messages[0]["content"] for episode in group.episodes}
        assert len(seeds) == 1 and None not in seeds and len(firsts) == 1  # one task (seed), played 4 times
        assert {episode.group for episode in group.episodes} == {group.id}
        assert sorted(episode.group_member for episode in group.episodes) == [0, 1, 2, 3]
        assert sum(episode.advantage for episode in group.episodes) == pytest.approx(0.0, abs=1e-9)
    assert len({group.id for group in groups}) == 3


def test_a_failed_member_is_played_again_or_its_group_is_marked_incomplete(guess_url):
    async def policy(messages, tools):
        if not policy.failed and len(messages) == 1:  # the first call of all fails, as a model server might
            policy.failed = True
            raise ConnectionError("the model server went away")
        return bisecting(messages, tools)

    policy.failed = False
    [group] = run(play(guess_url, policy, num_envs=4, episodes=1, group_size=4, seed=3))
    assert group.complete and len(group.episodes) == 4 and all(e.error is None for e in group.episodes)
    policy.failed = False
    [group] = run(play(guess_url, policy, num_envs=4, episodes=1, group_size=4, seed=3, replacements=0))
    assert not group.complete and len(group.episodes) == 4
    failed = [e for e in group.episodes if e.error is not None]
    assert len(failed) == 1 and "went away" in failed[0].error and failed[0].advantage is None
    good = [e.advantage for e in group.episodes if e.error is None]
    assert len(good) == 3 and sum(good) == pytest.approx(0.0, abs=1e-9)


def test_group_arguments_are_checked():
    from openenv_gym.rollout.groups import advantages

    async def policy(messages, tools):
        return Reply(text="x")
    for bad, message in (({"group_size": 0}, "group_size must be at least 1"),
                         ({"group_size": 2, "advantage": "median"}, "advantage must be")):
        with pytest.raises(ValueError, match=message):
            run(play("ws://127.0.0.1:9", policy, num_envs=2, **bad))
    assert advantages([1.0, 3.0], "mean") == [-1.0, 1.0]
    assert advantages([1.0, 3.0], "mean_std") == pytest.approx([-1 / (1 + 1e-4), 1 / (1 + 1e-4)])
    assert advantages([1.0, 3.0], lambda returns: [r * 2 for r in returns]) == [2.0, 6.0]


@pytest.mark.parametrize("grouped", [False, True])
def test_a_rollout_that_stopped_resumes_playing_no_task_twice_and_none_skipped(tmp_path, guess_url, model_server,
                                                                                grouped):
    out = tmp_path / "episodes.jsonl"
    run_args = ["openenv/guess", "--model-url", model_server.url, "--model", "scripted", "--episodes", "6",
                "--seed", "40", "--num-envs", "4", "--env-url", guess_url, "--output", str(out)]
    if grouped:
        run_args += ["--group-size", "3"]
    assert cli(*run_args).returncode == 0
    whole = out.read_bytes().splitlines()
    assert len(whole) == (18 if grouped else 6)
    # the run "died": it had written 4 lines and part of a fifth (with groups: one group and part of another)
    out.write_bytes(b"\n".join(whole[:4]) + b"\n" + whole[4][:20])
    resumed = cli(*run_args, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    if grouped:
        assert "1 of 6 groups played; 2 unfinished lines taken out" in resumed.stderr
        by_group: dict[str, list] = {}
        for line in lines:
            by_group.setdefault(line["group"], []).append(line)
        assert sorted(by_group) == [f"g{n}" for n in range(6)] and all(len(m) == 3 for m in by_group.values())
        assert [line["seed"] for line in lines[:3]] == [40] * 3  # what was whole is kept as it was
        assert {m[0]["seed"] for m in by_group.values()} == set(range(40, 46))
    else:
        assert "4 of 6 episodes played; 1 unfinished lines taken out" in resumed.stderr
        assert sorted(line["seed"] for line in lines) == list(range(40, 46))  # each task once
        assert out.read_bytes().splitlines()[:4] == whole[:4]
    again = cli(*run_args, "--resume")
    assert again.returncode == 0 and "nothing to play" in again.stdout
    wrong = cli(*[a if a != "40" else "0" for a in run_args], "--resume")
    # another run's file is refused, and left as it was
    assert wrong.returncode == 1
    assert ("another --seed or --split" if grouped else "outside this run's 0 to 5") in wrong.stderr
    assert [json.loads(line) for line in out.read_text().splitlines()] == lines


def test_rescore_replays_each_episode_and_says_what_changed(tmp_path, guess_url, model_server):
    out = tmp_path / "episodes.jsonl"
    done = cli("openenv/guess", "--model-url", model_server.url, "--model", "scripted", "--episodes", "8",
               "--group-size", "2", "--num-envs", "4", "--env-url", guess_url, "--output", str(out))
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    # the file as an older verifier scored it: two returns off, one episode recorded as cut short
    stored = [dict(r) for r in records]
    stored[0] |= {"rewards": [r + 0.5 for r in stored[0]["rewards"]], "total_reward": stored[0]["total_reward"] + 0.5}
    stored[3] |= {"rewards": [0.0] * stored[3]["steps"], "total_reward": 0.0}
    stored[5] |= {"terminated": False, "truncated": True}
    old = tmp_path / "old.jsonl"
    old.write_text("".join(json.dumps(r) + "\n" for r in stored) + "not an episode\n")

    rescored = subprocess.run([sys.executable, "-m", "openenv_gym", "rescore", str(old), "openenv/guess",
                               "--env-url", guess_url, "--num-envs", "5"], capture_output=True, text=True, timeout=120)
    assert rescored.returncode == 0, rescored.stderr
    summary = dict(line.split("  ", 1) for line in rescored.stdout.splitlines())
    assert summary["episodes"].strip() == "16" and summary["replayed"].strip() == "16"
    assert summary["return changed"].strip() == "2" and summary["ended differently"].strip() == "1"
    assert summary["lines not episodes"].strip() == "1"
    new = [json.loads(line) for line in (tmp_path / "old.rescored.jsonl").read_text().splitlines()]
    # the replay gives back what the env gave the first time: the same rewards, endings and the group advantages
    for before, after in zip(records, new, strict=True):
        assert after["rewards"] == pytest.approx(before["rewards"]) and after["steps"] == before["steps"]
        assert (after["terminated"], after["truncated"]) == (before["terminated"], before["truncated"])
        assert after["advantage"] == pytest.approx(before["advantage"], abs=1e-9)
    assert new[0]["rescore"]["previous_total_reward"] == pytest.approx(records[0]["total_reward"] + 0.5)
    assert [r["rescore"]["same_ending"] for r in new].count(False) == 1 and not new[5]["rescore"]["same_ending"]
    assert wait_until(lambda: health(guess_url)["sessions"] == 0)

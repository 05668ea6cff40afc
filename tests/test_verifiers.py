"""Verifiers environments imported and served: the real `verifiers` (classic API) in the environments' venv.

Every reward is checked against what verifiers computes in process for the same replies (replay.py,
run by the environment venv's python with no openenv_gym involved).
"""

import asyncio
import contextlib
import json
import subprocess
import time
from pathlib import Path

import gymnasium as gym
import httpx
import numpy as np
import pytest
from conftest import http_url, write_files
from tool_shape import names_of

import openenv_gym
from benchmarks.episodes import ENVS as BENCH_ENVS
from benchmarks.guessing_policy import bisect_guess
from openenv_gym.errors import ServerStartError
from openenv_gym.importers import ImportFailedError, import_environment
from openenv_gym.manifests import find_manifest
from openenv_gym.manifests.venvs import ensure_venv
from openenv_gym.registry import register_all

VF_ENVS = Path(__file__).parent / "verifiers_envs"
# the multi-turn game is also the Verifiers benchmark's environment, so it lives with the benchmark
SOURCES = {"quiz": VF_ENVS / "quiz", "guessing": BENCH_ENVS / "vf_guessing",
           "calculator": VF_ENVS / "calculator", "ranked": VF_ENVS / "ranked"}
pytestmark = pytest.mark.env_venvs(*SOURCES.values(), VF_ENVS / "routed")
bisect = bisect_guess  # the game's scripted policy: the middle of the range the last message names


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    """Import the test environments once, build their venv (one: same dependencies), register the ids."""
    out = tmp_path_factory.mktemp("servers")
    for name, source in SOURCES.items():
        import_environment(source, name, out)
    register_all()
    return {name: ensure_venv(find_manifest(name)) for name in SOURCES}


def in_process(pythons, name, episodes, env_args=None):
    """Reward, metrics and stop condition of each episode, computed by verifiers alone."""
    job = {"source": str(SOURCES[name] / f"{name}.py"), "env_args": env_args or {}, "episodes": episodes}
    done = subprocess.run([str(pythons[name]), str(VF_ENVS / "replay.py")], input=json.dumps(job),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def text(reply):
    return {"content": reply, "tool_calls": []}


def play_guessing(env, **reset):
    """One game with the bisecting policy; (replies, final step)."""
    obs, info = env.reset(**reset)
    replies = []
    while True:
        replies.append(bisect(obs))
        obs, reward, terminated, truncated, info = env.step(replies[-1])
        if terminated or truncated:
            return replies, (obs, reward, terminated, truncated, info)


def test_single_turn_quiz(imported):
    env = gym.make("openenv/verifiers-quiz")
    assert env.unwrapped.description["action"] == "text"
    obs, info = env.reset(options={"split": "eval", "index": 0})
    assert obs == "system: Reason in <reasoning> tags, then answer in <answer> tags.\n\nuser: What is 10 - 4?"
    assert [m["role"] for m in info["messages"]] == ["system", "user"]
    assert info["split"] == "eval" and info["index"] == 0 and "answer" not in info and "6" not in str(info)
    assert env.reset(seed=5) == env.reset(seed=5)  # the seeded row choice is reproducible

    replies = ["<reasoning>10 - 4</reasoning>\n<answer>6</answer>", "<answer>7</answer>"]
    results = []
    for reply in replies:
        obs, info = env.reset(options={"split": "eval", "index": 0, "expose_answer": True})
        assert info["answer"] == "6"
        results.append(env.step(reply))
    env.close()
    expected = in_process(imported, "quiz", [{"split": "eval", "index": 0, "replies": [text(r)]} for r in replies])
    for (_, reward, terminated, truncated, info), oracle in zip(results, expected, strict=True):
        # one turn is a single-turn environment's natural end: terminated, not truncated
        assert (terminated, truncated) == (True, False)
        assert reward == oracle["reward"] and info["metrics"] == oracle["metrics"]
        assert info["stop_condition"] == oracle["stop_condition"] == "max_turns_reached"
    assert results[0][1] == pytest.approx(1.2)  # correct (1.0) + format (0.2 x 1.0)
    assert results[1][4]["metrics"]["correct_answer"] == 0.0


def test_a_thinking_models_reasoning_reaches_the_rubric_as_from_verifiers_own_client(imported):
    """OpenAIPolicy plays the quiz with a model server that answers as vLLM with a reasoning parser does; the
    reasoning reaches verifiers where its own client puts it (the completion's assistant message), so the quiz's
    `reasoned` metric, and every score, are those of verifiers' own client asking the same server."""
    from openai_server import ScriptedServer

    from openenv_gym import OpenAIPolicy, rollouts

    async def ours(url):
        policy = OpenAIPolicy(url, "thinker")
        try:
            async with contextlib.aclosing(rollouts("openenv/verifiers-quiz", policy, num_envs=1, episodes=1,
                                                    tasks=[{"split": "eval", "index": 0}])) as stream:
                return [episode async for episode in stream]
        finally:
            await policy.aclose()

    with ScriptedServer() as model:
        [episode] = asyncio.run(ours(model.url))
        [oracle] = in_process(imported, "quiz", [{"split": "eval", "index": 0,
                                                  "model": {"base_url": model.url, "name": "thinker"}}])
    assert episode.error is None and episode.messages[1]["reasoning_content"]
    assert episode.info["metrics"] == oracle["metrics"] and oracle["metrics"]["reasoned"] == 1.0
    assert episode.total_reward == oracle["reward"]


def render_final(messages):
    return "\n\n".join(f"{m['role']}: {m['content']}" for m in messages)


def test_multi_turn_game(imported):
    env = gym.make("openenv/verifiers-guessing")
    assert env.unwrapped.description["max_steps"] == 10
    replies, (obs, reward, terminated, truncated, info) = play_guessing(env, options={"index": 3})
    assert (terminated, truncated) == (True, False) and info["stop_condition"] == "solved"
    assert reward > 1.0 and info["metrics"]["num_turns"] == len(replies)
    assert obs == (render_final(info["messages"]) or f"The episode is over (solved); reward {reward:g}.")

    obs, _ = env.reset(options={"index": 3})
    obs, reward, terminated, truncated, info = env.step("<guess>1</guess>")
    assert obs == "user: Too low. The number is between 2 and 100." and reward == 0.0 and not terminated
    assert info["messages"] == [{"role": "user", "content": "Too low. The number is between 2 and 100."}]
    obs, *_ = env.step("no guess here")
    assert obs == "user: Reply with <guess>N</guess>. The number is between 2 and 100."
    stubborn = ["<guess>1</guess>", "no guess here"]
    for _ in range(8):  # max_turns is 10: the cap cuts the episode short
        stubborn.append("<guess>1</guess>")
        obs, reward, terminated, truncated, info = env.step(stubborn[-1])
    assert (terminated, truncated) == (False, True) and info["stop_condition"] == "max_turns_reached"
    with pytest.raises(openenv_gym.NoEpisodeError):
        env.step("<guess>50</guess>")
    env.close()

    solved, capped = in_process(imported, "guessing", [
        {"split": "train", "index": 3, "replies": [text(r) for r in replies]},
        {"split": "train", "index": 3, "replies": [text(r) for r in stubborn]}])
    assert solved["reward"] == pytest.approx(1.0 + 0.5 * (1 - len(replies) / 11))
    assert (reward, info["metrics"]) == (capped["reward"], capped["metrics"])


def test_game_rewards_match_in_process(imported):
    env = gym.make("openenv/verifiers-guessing")
    games = [(index, *play_guessing(env, options={"index": index})) for index in range(6)]
    env.close()
    expected = in_process(imported, "guessing", [
        {"split": "train", "index": index, "replies": [text(r) for r in replies]} for index, replies, _ in games])
    for (_, _, final), oracle in zip(games, expected, strict=True):
        assert final[1] == oracle["reward"] and final[4]["metrics"] == oracle["metrics"]
        assert final[4]["stop_condition"] == oracle["stop_condition"]


def test_tool_environment(imported):
    env = gym.make("openenv/verifiers-calculator")
    assert env.action_space.tool_names == ["add", "multiply"]
    assert env.unwrapped.description["description"] == "Arithmetic with two Python tools (add, multiply)"
    obs, info = env.reset(options={"index": 0})
    assert obs == "user: Compute (3 + 4) * 5 with the tools, then give <answer>N</answer>."
    assert info["tools"] == env.unwrapped.description["tools"]  # every reset shows the tools, as /info does
    assert names_of(info["tools"]) == ["add", "multiply"]
    assert env.reset(options={"task": 0})[0] == obs  # the one vocabulary: a task by its index
    with pytest.raises(openenv_gym.BadRequestError, match="'task_spec'; it understands: env_seconds, "
                                                          "episode_id, expose_answer"):
        env.reset(options={"task_spec": {"prompt": "2 + 2"}})
    obs, info = env.reset(options={"index": 0})
    obs, *_ = env.step('<tool_call>{"name": "add", "arguments": {"a": 3, "b": 4}}</tool_call>')  # raw model text
    assert obs == "tool: 7"
    openai_call = {"id": "call_x", "type": "function",
                   "function": {"name": "multiply", "arguments": '{"a": 7, "b": 5}'}}
    obs, reward, terminated, truncated, info = env.step({"content": None, "tool_calls": [openai_call]})
    assert obs == "tool: 35" and info["messages"][0]["tool_call_id"] == "call_x" and not terminated
    obs, reward, terminated, truncated, info = env.step({"tool_calls": "not a list"})
    assert info["error"]["code"] == "invalid_action" and not terminated  # refused; the rollout did not move
    obs, reward, terminated, truncated, info = env.step("<answer>35</answer>")
    assert (reward, terminated, truncated) == (1.0, True, False) and info["stop_condition"] == "no_tools_called"
    assert info["metrics"]["total_tool_calls"] == 2 and info["metrics"]["add_calls"] == 1
    env.close()

    (oracle,) = in_process(imported, "calculator", [{"split": "train", "index": 0, "replies": [
        {"content": None, "tool_calls": [{"id": "a", "name": "add", "arguments": '{"a": 3, "b": 4}'}]},
        {"content": None, "tool_calls": [{"id": "b", "name": "multiply", "arguments": '{"a": 7, "b": 5}'}]},
        text("<answer>35</answer>")]}])
    assert (reward, info["metrics"], info["stop_condition"]) == (
        oracle["reward"], oracle["metrics"], oracle["stop_condition"])


def test_concurrent_games_keep_separate_state(imported):
    first, second = gym.make("openenv/verifiers-guessing"), gym.make("openenv/verifiers-guessing")
    obs_a, _ = first.reset(options={"index": 0})  # secret 1
    obs_b, _ = second.reset(options={"index": 2})  # secret 75
    steps = {0: [], 2: []}
    for _ in range(10):
        for index, env, obs in ((0, first, obs_a), (2, second, obs_b)):
            if steps[index] and (steps[index][-1][2] or steps[index][-1][3]):
                continue
            steps[index].append(env.step(bisect(obs)))
        obs_a, obs_b = steps[0][-1][0], steps[2][-1][0]
    alone = gym.make("openenv/verifiers-guessing")
    for index, interleaved in steps.items():
        replies, final = play_guessing(alone, options={"index": index})
        assert len(interleaved) == len(replies) and interleaved[-1][1] == final[1]  # as if played alone
        assert interleaved[-1][4]["stop_condition"] == "solved"
    for env in (first, second, alone):
        env.close()


def test_make_vec(imported):
    envs = gym.make_vec("openenv/verifiers-guessing", num_envs=4)
    obs, info = envs.reset(seed=11)
    playing = [{"index": int(info["index"][i]), "replies": []} for i in range(4)]
    finished = []
    while len(finished) < 8:
        actions = [bisect(o) for o in obs]
        for game, action in zip(playing, actions, strict=True):
            if game is not None:  # None: this step resets the env (NEXT_STEP autoreset), the action is ignored
                game["replies"].append(action)
        obs, rewards, terminations, truncations, info = envs.step(np.array(actions, dtype=object))
        for i in range(4):
            if playing[i] is None:
                playing[i] = {"index": int(info["index"][i]), "replies": []}
            elif terminations[i] or truncations[i]:
                metrics = {key: float(column[i]) for key, column in info["metrics"].items() if key[0] != "_"}
                finished.append((playing[i], float(rewards[i]), metrics))
                playing[i] = None
    envs.close()
    expected = in_process(imported, "guessing", [
        {"split": "train", "index": game["index"], "replies": [text(r) for r in game["replies"]]}
        for game, _, _ in finished])
    for (_, reward, metrics), oracle in zip(finished, expected, strict=True):
        assert reward == oracle["reward"] and metrics == oracle["metrics"]


def test_env_args(imported):
    env = gym.make("openenv/verifiers-guessing", env_args={"max_turns": 2, "timeout_seconds": 1.0})
    assert env.unwrapped.description["env_args"] == {"max_turns": 2, "timeout_seconds": 1.0}
    env.reset(options={"index": 2})
    env.step("<guess>1</guess>")
    obs, reward, terminated, truncated, info = env.step("<guess>2</guess>")
    assert truncated and not terminated and info["stop_condition"] == "max_turns_reached"

    env.reset(options={"index": 2})
    time.sleep(1.5)  # the policy "thinks" past the environment's own timeout
    obs, reward, terminated, truncated, info = env.step("<guess>75</guess>")
    assert truncated and info["stop_condition"] == "timeout_reached" and reward == 0.0

    with pytest.raises(ValueError, match=r"runs 'guessing' with env_args .* not .*max_turns.*: 5"):
        gym.make("openenv/verifiers-guessing", base_url=env.unwrapped.base_url, env_args={"max_turns": 5})
    same = gym.make("openenv/verifiers-guessing", base_url=env.unwrapped.base_url, env_args={"max_turns": 2})
    assert same.reset(options={"index": 0})[0].startswith("user: I am thinking of a number")  # a running server
    same.close()
    env.close()


def test_env_args_from_the_manifest(imported, tmp_path):
    (folder,) = import_environment(SOURCES["guessing"], "guessing3", tmp_path)
    manifest = folder.folder / "openenv.toml"
    manifest.write_text(manifest.read_text() + "\n[env_args]\nmax_turns = 3\n")
    register_all()
    env = gym.make("openenv/verifiers-guessing3")
    assert env.unwrapped.description["max_steps"] == 3
    env.close()


def test_task_catalog_lists_rows_without_answers_unless_the_server_reveals_them(imported, start_server):
    env = gym.make("openenv/verifiers-quiz")
    url = http_url(env.unwrapped.base_url)
    assert httpx.get(url + "/splits").json()["splits"] == [
        {"name": "train", "type": "train", "num_tasks": 3}, {"name": "eval", "type": "test", "num_tasks": 2}]
    tasks = httpx.get(url + "/tasks", params={"split": "eval", "start": 1}).json()
    assert tasks["split"] == "eval" and tasks["hidden"] and len(tasks["tasks"]) == 1
    assert tasks["tasks"][0]["prompt"][-1] == {"role": "user", "content": "Largest planet?"}
    assert "Jupiter" not in str(tasks) and "answer" not in tasks["tasks"][0] and "info" not in tasks["tasks"][0]
    env.close()
    revealing = http_url(start_server("verifiers-quiz", "--reveal-tasks"))
    tasks = httpx.get(revealing + "/tasks", params={"split": "eval", "start": 1}).json()
    assert not tasks["hidden"] and [t["answer"] for t in tasks["tasks"]] == ["Jupiter"]


def in_process_groups(pythons, name, groups):
    """Each group's rewards and metrics as verifiers scores a group: its rollouts, then the rubric's score_group."""
    job = {"source": str(SOURCES[name] / f"{name}.py"), "groups": groups}
    done = subprocess.run([str(pythons[name]), str(VF_ENVS / "replay.py")], input=json.dumps(job),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


ANSWERS = {"2 + 3": ["<answer>5</answer>", "<answer>6</answer>", "The sum: <answer>5</answer>", "<answer>5</answer>"],
           "7 * 6": ["<answer>42</answer>", "<answer>42</answer>", "<answer>41</answer>", "so <answer>42</answer>"],
           "France": ["<answer>Lyon</answer>", "<answer>Lyon</answer>", "<answer>Paris</answer>", "Paris"]}


def test_group_reward_functions_score_each_group_as_verifiers_score_group_does(imported):
    """A rubric with group reward functions: the server keeps each member's rollout state and runs the rubric's
    own score_group over the group, with the rewards and metrics verifiers computes for the same completions."""
    turns = iter(range(10_000))

    async def policy(messages, tools):
        question = next(key for key in ANSWERS if key in messages[-1]["content"])
        return ANSWERS[question][next(turns) % 4]

    async def main():
        tasks = [{"split": "train", "index": i} for i in (0, 1, 2, 1)]
        async with contextlib.aclosing(openenv_gym.rollouts("openenv/verifiers-ranked", policy, num_envs=6,
                                                            tasks=tasks, group_size=4)) as stream:
            return [group async for group in stream]

    groups = asyncio.run(main())
    assert len(groups) == 4 and all(group.complete and len(group.episodes) == 4 for group in groups)
    expected = in_process_groups(imported, "ranked", [
        [{"split": "train", "index": e.options["index"],
          "replies": [{"content": m["content"]} for m in e.messages if m["role"] == "assistant"]}
         for e in group.episodes] for group in groups])
    spread = set()
    for group, oracle in zip(groups, expected, strict=True):
        for episode, theirs in zip(group.episodes, oracle, strict=True):
            assert episode.group_reward == pytest.approx(theirs["reward"])
            assert episode.info["metrics"] == pytest.approx(theirs["metrics"])
            assert episode.total_reward == 0.0  # a group rubric gives no per-rollout reward
        rewards = [e.group_reward for e in group.episodes]
        spread.add(max(rewards) - min(rewards))
        mean = sum(rewards) / 4
        assert [e.advantage for e in group.episodes] == pytest.approx([r - mean for r in rewards])
    assert max(spread) > 0  # the group functions made a difference


def test_spec_rows_are_the_task_catalog_without_answers(imported):
    pytest.importorskip("trl")
    from openenv_gym.integrations.trl import spec

    rows = spec("openenv/verifiers-quiz").train_dataset  # its train split, every task
    assert rows["split"] == ["train"] * 3 and rows["index"] == [0, 1, 2]
    assert "answer" not in rows.column_names and "Paris" not in str(rows.to_list())
    assert spec("openenv/verifiers-quiz", split="eval", num_tasks=1).train_dataset["index"] == [0]
    with pytest.raises(ValueError, match="has no split 'test'; its splits: train, eval"):
        _ = spec("openenv/verifiers-quiz", split="test").train_dataset


def test_env_args_are_for_verifiers_environments_only(imported, capfd):
    with pytest.raises(ServerStartError):
        gym.make("openenv/echo", env_args={"size": 3})
    assert "echo is a python environment, which takes no env_args" in capfd.readouterr().err


def test_plain_string_task_rows_run_on_the_verifiers_their_pin_names(imported, tmp_path):
    """The source pins verifiers==0.1.12 (its own venv): its string `task` reaches the reward function.
    The same source pinned to >= 0.2 is refused at import, with what to change."""
    import_environment(VF_ENVS / "routed", "routed", tmp_path / "out")
    register_all()
    env = gym.make("openenv/verifiers-routed")
    env.reset(options={"index": 0})
    assert env.step("Hello there!")[1] == 1.0
    env.close()
    newer = write_files(tmp_path / "routed_new", {
        "routed.py": (VF_ENVS / "routed" / "routed.py").read_text(),
        "pyproject.toml": '[project]\nname = "routed"\ndependencies = ["verifiers>=0.2"]\n'})
    with pytest.raises(ImportFailedError, match=r"plain-string `task` column.*pin verifiers==0.1.12"):
        import_environment(newer, "routed_new", tmp_path / "out")


def test_group_reward_functions_score_make_vec_groups_as_verifiers_does(imported):
    envs = gym.make_vec("openenv/verifiers-ranked", num_envs=8, group_size=4)
    try:
        obs, task = envs.reset(seed=3)
        replies = [next(ANSWERS[key][env % 4] for key in ANSWERS if key in obs[env]) for env in range(8)]
        _, rewards, terminated, _, info = envs.step(replies)
        assert terminated.all() and (rewards == 0.0).all()
        scored = [env for env in range(8) if info["_group_rewards"][env]]
        assert len(scored) == 2 and {env // 4 for env in scored} == {0, 1}
        expected = in_process_groups(imported, "ranked", [
            [{"split": task["split"][env], "index": int(task["index"][env]), "replies": [{"content": replies[env]}]}
             for env in range(4 * group, 4 * group + 4)] for group in (0, 1)])
        for env, oracle in zip(scored, expected, strict=True):
            assert info["group_rewards"][env] == pytest.approx([member["reward"] for member in oracle])
            for ours, theirs in zip(info["group_infos"][env], oracle, strict=True):
                assert ours["metrics"] == pytest.approx(theirs["metrics"])
    finally:
        envs.close()

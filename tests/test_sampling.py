"""Task samplers (openenv_gym.sampling): RFC 013's interface, weights against hand-computed ones, draws at most
once per task per round, state that survives JSON, and the metrics' counts."""

import asyncio
import contextlib
import itertools
import json
import math
import subprocess
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import gymnasium as gym
import numpy as np
import orjson
import pytest
from conftest import ROOT, env_path
from openai_server import ScriptedServer

import openenv_gym
from openenv_gym.client.local import LocalServer
from openenv_gym.sampling import (
    CurriculumSampler,
    DifficultyPoolSampler,
    SequentialSampler,
    ServerSampler,
    TaskSampler,
    UniformSampler,
    ZeroSignalGate,
    catalog,
)

TASKS = [{"task": k} for k in range(3)]


def test_curriculum_weights_are_rfc_013s_with_power_one():
    sampler = CurriculumSampler(TASKS, group_size=4, power=1, epsilon=0.01, decay=0.9)
    unplayed = (1 - 0.5**4 - 0.5**4 + 0.01) / 4  # p = 1/2 from the Beta(1, 1) prior; a group costs 4 episodes
    assert sampler.weights.tolist() == pytest.approx([unplayed] * 3)
    sampler.update({"task": 0}, [1, 0, 1, 1])  # 3 successes, 1 failure: p = (1 + 3) / (2 + 4)
    p = 4 / 6
    assert sampler.weights[0] == pytest.approx((1 - p**4 - (1 - p) ** 4 + 0.01) / 4)
    sampler.update({"task": 0}, [0, 0, 0, 0])  # the earlier counts decay: 2.7 successes, 0.9 + 4 failures
    p = (1 + 2.7) / (2 + 2.7 + 4.9)
    assert sampler.weights[0] == pytest.approx((1 - p**4 - (1 - p) ** 4 + 0.01) / 4)
    assert sampler.weights[1:].tolist() == pytest.approx([unplayed] * 2)

    sharper = CurriculumSampler(TASKS, group_size=4, power=3, epsilon=0.01)
    sharper.update({"task": 0}, [1, 0, 1, 1])
    assert sharper.weights[0] == pytest.approx(((1 - (4 / 6) ** 4 - (2 / 6) ** 4 + 0.01) / 4) ** 3)


def test_curriculum_costs_in_tokens_or_given_per_task():
    sampler = CurriculumSampler(TASKS, group_size=2, power=1, epsilon=0.0, cost="tokens")
    sampler.update({"task": 0}, [1, 0], costs=[100, 300])  # a group of 400 tokens
    sampler.update({"task": 1}, [1, 0], costs=[50, 150])  # and one of 200
    signal = 1 - (2 / 4) ** 2 - (2 / 4) ** 2  # p = (1 + 1) / (2 + 2) for both
    sampler.sample(1)  # (a task not played yet is weighed at each draw, at the mean cost so far)
    assert sampler.weights.tolist() == pytest.approx([signal / 400, signal / 200, 0.5 / 300])
    given = CurriculumSampler(TASKS, group_size=2, power=1, epsilon=0.0, cost=lambda task: 1 + task["task"])
    assert given.weights.tolist() == pytest.approx([0.5 / 1, 0.5 / 2, 0.5 / 3])
    with pytest.raises(ValueError, match="cost must be"):
        CurriculumSampler(TASKS, group_size=2, cost="dollars")


@pytest.mark.parametrize("make", [UniformSampler, CurriculumSampler, DifficultyPoolSampler, SequentialSampler])
def test_a_draw_holds_each_task_once_per_round_of_the_catalog(make):
    sampler = make([{"split": "train", "index": k} for k in range(10)], group_size=8, seed=1)
    assert isinstance(sampler, TaskSampler)
    few = sampler.sample(7)
    assert len(few) == 7 and len({json.dumps(t, sort_keys=True) for t in few}) == 7
    many = Counter(json.dumps(t, sort_keys=True) for t in sampler.sample(25))  # 2 whole rounds, then 5 more
    assert sorted(many.values()) == [2] * 5 + [3] * 5


def test_draws_follow_the_weights():
    tasks = [{"task": k} for k in range(3)]
    sampler = DifficultyPoolSampler(tasks, group_size=4, seed=3)
    sampler.update({"task": 0}, [0, 0, 0, 0])  # hard: weight 0.2
    sampler.update({"task": 1}, [1, 1, 1, 1])  # easy: 0.2; task 2 not played: normal, 1.0
    assert sampler.metrics()["pool_hard"] == sampler.metrics()["pool_easy"] == sampler.metrics()["pool_normal"] == 1
    draws = Counter(sampler.sample(1)[0]["task"] for _ in range(7000))
    for task, weight in ((0, 0.2), (1, 0.2), (2, 1.0)):
        expected = 7000 * weight / 1.4
        assert abs(draws[task] - expected) < 4 * math.sqrt(expected), draws


def test_state_survives_json_and_the_resumed_sampler_draws_the_same():
    sampler = CurriculumSampler([{"task": k} for k in range(50)], group_size=4, seed=7)
    rng = np.random.default_rng(0)
    for _ in range(20):
        for task in sampler.sample(8):
            sampler.update(task, (rng.random(4) < task["task"] / 50).astype(float).tolist())
    state = json.loads(json.dumps(sampler.state_dict()))
    resumed = CurriculumSampler([{"task": k} for k in range(50)], group_size=4, seed=99)
    resumed.load_state_dict(state)
    assert resumed.metrics() == sampler.metrics() and resumed.weights.tolist() == sampler.weights.tolist()
    assert resumed.sample(16) == sampler.sample(16)
    with pytest.raises(ValueError, match="does not fit a UniformSampler over 50"):
        UniformSampler([{"task": k} for k in range(50)], group_size=4).load_state_dict(state)
    walker = SequentialSampler(TASKS, group_size=2)
    walker.sample(2)
    again = SequentialSampler(TASKS, group_size=2)
    again.load_state_dict(json.loads(json.dumps(walker.state_dict())))
    assert again.sample(3) == [{"task": 2}, {"task": 0}, {"task": 1}]


def test_metrics_count_the_groups_that_carry_a_gradient():
    sampler = UniformSampler(TASKS, group_size=4)
    sampler.update({"task": 0}, [1, 1, 1, 1])  # no signal
    sampler.update({"task": 1}, [0.5, 0.5 + 1e-7, 0.5, 0.5])  # within the tolerance: none
    sampler.update({"task": 2}, [0, 1, 0, 0], costs=[10, 10, 10, 10])  # signal
    assert sampler.metrics() == {"groups": 3, "episodes": 12, "signal_groups": 1,
                                 "signal_groups_per_episode": pytest.approx(1 / 12),
                                 "signal_groups_per_cost": pytest.approx(1 / (4 + 4 + 40)),
                                 "zero_signal_fraction": pytest.approx(2 / 3), "groups_dropped": 0,
                                 "groups_short": 0}
    with pytest.raises(ValueError, match="is not a task of this sampler"):
        sampler.update({"task": 9}, [1])
    with pytest.raises(ValueError, match="at least one task"):
        UniformSampler([], group_size=4)
    with pytest.raises(ValueError, match="same reset options twice"):
        UniformSampler([{"task": 1}, {"task": 1}], group_size=4)


def test_a_catalog_is_read_from_the_environment():
    lines = (ROOT / "servers" / "calc_agent" / "tasks.jsonl").read_text().splitlines()
    tasks = catalog("openenv/agent-calc")
    assert len(tasks) == len([line for line in lines if line.strip()])
    assert tasks[0] == {"split": tasks[0]["split"], "index": 0} and tasks[-1]["index"] == len(tasks) - 1
    with pytest.raises(ValueError, match="has no split 'nope'"):
        catalog("openenv/agent-calc", split="nope")
    with pytest.raises(ValueError, match="lists no tasks"):
        catalog("openenv/echo")


def _play(url, policy, sampler, env="openenv/echo", **kwargs):
    async def main():
        async with contextlib.aclosing(openenv_gym.rollouts(env, policy, num_envs=4, group_size=sampler.group_size,
                                                            sampler=sampler, base_url=url, **kwargs)) as stream:
            return [group async for group in stream]
    return asyncio.run(main())


def test_rollouts_play_the_tasks_a_sampler_chooses_and_give_it_each_groups_rewards(echo_url):
    """echo's reward is the reply's length / 10: a policy that varies its replies gives groups with signal."""
    tasks = [{"max_steps": 1}, {"max_steps": 2}, {"max_steps": 3}]
    sampler = CurriculumSampler(tasks, group_size=4, seed=0)
    lengths = iter(itertools.cycle([1, 2, 3, 5, 8]))

    async def varied(messages, tools):
        return "x" * next(lengths)

    groups = _play(echo_url, varied, sampler, episodes=6, seed=0)
    assert len(groups) == 6 and all(len(group.episodes) == 4 for group in groups)
    for group in groups:  # each group played one task the sampler gave, its steps bounded by the task's max_steps
        steps = {len(episode.rewards) for episode in group.episodes}
        assert len(steps) == 1 and {"max_steps": steps.pop()} in tasks
    metrics = sampler.metrics()
    assert metrics["groups"] == 6 and metrics["episodes"] == 24 and metrics["signal_groups"] == 6
    assert sampler.played.sum() == 6  # the curriculum learned from each


def test_a_zero_signal_gate_drops_groups_replaces_them_up_to_a_bound_then_ends_short(echo_url):
    sampler = UniformSampler([{"max_steps": 1}, {"max_steps": 2}], group_size=4, seed=0)

    async def constant(messages, tools):
        return "same"

    groups = _play(echo_url, constant, sampler, episodes=5, gates=[ZeroSignalGate()], max_extra=3)
    assert groups == []  # every group scored the same in all its members: none reaches the trainer
    metrics = sampler.metrics()
    assert (metrics["groups"], metrics["groups_dropped"], metrics["groups_short"]) == (8, 8, 5)
    with pytest.raises(ValueError, match="give group_size, and no tasks"):
        asyncio.run(anext(openenv_gym.rollouts("openenv/echo", constant, num_envs=1, sampler=sampler,
                                               base_url=echo_url)))


def test_the_rollout_command_samples_the_envs_catalog_and_prints_the_samplers_metrics(tmp_path):
    out = tmp_path / "episodes.jsonl"
    with ScriptedServer() as model:  # it answers as a model would; the calculator agent asks it each turn
        done = subprocess.run([sys.executable, "-m", "openenv_gym", "rollout", "openenv/agent-calc", "--model-url",
                               model.url, "--model", "scripted", "--episodes", "3", "--group-size", "2",
                               "--num-envs", "4", "--sampler", "curriculum", "--output", str(out)],
                              capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    metrics = dict(line.split()[1:3] for line in done.stdout.splitlines() if line.startswith("sampler "))
    assert (metrics["groups"], metrics["episodes"]) == ("3", "6") and "zero_signal_fraction" in metrics
    played = [json.loads(line) for line in out.read_text().splitlines()]
    catalogued = catalog("openenv/agent-calc")
    assert len(played) == 6 and all({"split", "index"} <= set(line["options"]) for line in played)
    assert all({"split": line["options"]["split"], "index": line["options"]["index"]} in catalogued for line in played)
    refused = subprocess.run([sys.executable, "-m", "openenv_gym", "rollout", "openenv/agent-calc", "--model-url",
                              "http://127.0.0.1:9/v1", "--model", "m", "--episodes", "1", "--sampler", "uniform"],
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode == 1 and "give --group-size" in refused.stderr


def test_a_curriculum_counts_cost_in_the_environments_seconds_or_the_policys_tokens(start_server):
    """cost="seconds": the server's env_seconds of each episode (its steps sleep what the policy says: a task of
    two steps costs twice one of one step); cost="tokens": the completion tokens the policy's turns gave."""
    url = start_server(env_path("blocking"))
    tasks = [{"max_steps": 1}, {"max_steps": 2}]

    async def sleepy(messages, tools):
        return "0.03"

    by_seconds = CurriculumSampler(tasks, group_size=2, seed=0, cost="seconds")
    _play(url, sleepy, by_seconds, env="openenv/remote", episodes=6, seed=0)
    per_group = by_seconds.spent / by_seconds.played
    assert by_seconds.played.min() >= 1 and 0.12 <= per_group[1] < 0.2 and 0.06 <= per_group[0] < 0.1
    assert by_seconds.metrics()["signal_groups_per_cost"] == 0  # (a sleep scores 0: no group carries signal)

    async def counted(messages, tools):
        return openenv_gym.Reply(text="0", completion_ids=[7] * (3 + len(messages)))

    by_tokens = CurriculumSampler(tasks, group_size=2, seed=0, cost="tokens")
    _play(url, counted, by_tokens, env="openenv/remote", episodes=4, seed=0)
    # one turn of 3 + 1 tokens per episode of one step; 4 + 6 for two steps (the conversation grows by two)
    assert by_tokens.cost == sum(by_tokens.played * [2 * 4, 2 * 10]) and by_tokens.played.sum() == 4
    with pytest.raises(ValueError, match="a turn without its token ids"):
        _play(url, sleepy, CurriculumSampler(tasks, group_size=2, cost="tokens"), env="openenv/remote", episodes=1)


class _Recording(SequentialSampler):
    """The catalog in order, and every group given back, kept (to compare with what the envs played)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.given = []

    def update(self, task, rewards, costs=None):
        self.given.append((task["max_steps"], sorted(round(r, 6) for r in rewards), costs))
        super().update(task, rewards, costs)


def test_make_vec_autoresets_each_group_into_the_task_the_sampler_chose(echo_url):
    """Envs [2k, 2k+2) are a group: each of its episodes plays the task the sampler gave it (here the step limit:
    1, 2, 3, 1, ...); when both members have ended, their returns go back to update."""
    sampler = _Recording([{"max_steps": k} for k in (1, 2, 3)], group_size=2)
    envs = gym.make_vec("openenv/echo", num_envs=4, base_url=echo_url, sampler=sampler, autoreset_mode="NextStep")
    played, returns, steps = [], np.zeros(4), np.zeros(4, dtype=int)
    try:
        envs.reset(seed=0)
        for turn in range(14):
            actions = ["x" * (1 + env + turn % 3) for env in range(4)]  # reward: length / 10, members differ
            _, rewards, terminated, truncated, infos = envs.step(actions)
            returns += rewards
            steps += 1
            for env in np.flatnonzero(terminated | truncated):
                played.append((infos["group"][env], int(steps[env]), round(float(returns[env]), 6)))
            over = terminated | truncated
            returns[over], steps[over] = 0, -1  # the next step resets it, its action ignored (NEXT_STEP)
    finally:
        envs.close()
    by_episode = {}
    for name, length, returned in played:
        by_episode.setdefault(name, []).append((length, returned))
    # the catalog in order, group episode by group episode as they first reset: 0.0 and 1.0 at reset(), then ...
    assert {name: lengths[0][0] for name, lengths in by_episode.items()}["0.0"] == 1
    assert {name: lengths[0][0] for name, lengths in by_episode.items()}["1.0"] == 2
    for members in by_episode.values():
        assert len(members) == 2 and members[0][0] == members[1][0]  # both members played the same task
    finished = [(members[0][0], sorted(r for _, r in members), None) for members in by_episode.values()]
    assert sorted(sampler.given) == sorted(finished)  # each finished group episode given back once, with its returns
    assert sampler.metrics()["groups"] == len(finished) >= 5
    with pytest.raises(ValueError, match="group_size 4 is not the sampler's"):
        gym.make_vec("openenv/echo", num_envs=4, base_url=echo_url, sampler=sampler, group_size=4)
    with pytest.raises(ValueError, match="the vector env sees no tokens"):
        gym.make_vec("openenv/echo", num_envs=4, base_url=echo_url,
                     sampler=CurriculumSampler([{}], group_size=2, cost="tokens"))


COIN = str(ROOT / "benchmarks" / "envs" / "coin")  # 200 tasks; one reply ends an episode, 1 for "win"


def _coin_groups(url, sampler, groups, seed):
    """`groups` groups of 4 played on the coin env by a policy that wins task i with chance i / 200."""
    import random

    chance = random.Random(seed)

    async def policy(messages, tools):
        task = int(messages[-1]["content"].split()[-1])
        return "win" if chance.random() < task / 200 else "lose"

    return _play(url, policy, sampler, env="openenv/remote", episodes=groups, seed=seed)


def test_one_curriculum_on_the_server_is_shared_by_two_workers_and_survives_a_restart(tmp_path, caplog):
    state = tmp_path / "sampler.json"
    options = ("--sampler", "curriculum", "--group-size", "4", "--sampler-state", str(state), "--sampler-seed", "3")
    with LocalServer(COIN, 2, 1000, *options) as server:  # two worker processes, one sampler
        workers = [ServerSampler(server.url) for _ in range(2)]
        assert workers[0].group_size == 4 and len(workers[0].tasks) == 200 and workers[0].name == "curriculum"
        with ThreadPoolExecutor(2) as pool:  # two rollout workers at once, each with its own connection
            played = list(pool.map(lambda k: _coin_groups(server.url, workers[k], 6, seed=k), range(2)))
        assert [len(groups) for groups in played] == [6, 6]
        metrics = workers[1].metrics()
        assert metrics["groups"] == 12 and metrics["episodes"] == 48 and metrics["groups_unsent"] == 0
        signal = sum(len({e.total_reward for e in group.episodes}) > 1 for groups in played for group in groups)
        assert metrics["signal_groups"] == signal  # it learned from every group of both workers
        before = workers[0].state_dict()
        assert sum(before["learned"]["played"]) == 12
        with pytest.raises(ValueError, match="--sampler-state FILE"):
            workers[0].load_state_dict(before)
        with pytest.raises(ValueError, match="refused: sample needs n"):
            workers[0].sample(0)
    assert orjson.loads(state.read_bytes())["learned"] == before["learned"]  # saved as the server stopped

    # the worker that lost its server goes on uniformly, says so, and is back once a server answers
    lost = workers[0]
    with caplog.at_level("WARNING", logger="openenv_gym.sampling.shared"):
        drawn = lost.sample(8)
    assert lost.local is not None and len(drawn) == 8 and all(task in lost.tasks for task in drawn)
    assert "sampling tasks locally and uniformly" in caplog.text
    lost.update(drawn[0], [0.0, 1.0, 1.0, 0.0])
    assert lost.metrics()["groups_unsent"] == 1

    with LocalServer(COIN, 1, 1000, *options) as server:  # restarted: the curriculum goes on where it was
        again = ServerSampler(server.url)
        assert again.state_dict()["learned"] == before["learned"] and again.metrics()["groups"] == 12
        _coin_groups(server.url, again, 2, seed=5)
        assert again.metrics()["groups"] == 14
    with LocalServer(COIN, 1, 1000) as server, pytest.raises(ConnectionError, match="shares no sampler"):
        ServerSampler(server.url)

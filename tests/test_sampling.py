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

import numpy as np
import pytest
from conftest import ROOT
from openai_server import ScriptedServer

import openenv_gym
from openenv_gym.sampling import (
    CurriculumSampler,
    DifficultyPoolSampler,
    SequentialSampler,
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


def _play(url, policy, sampler, **kwargs):
    async def main():
        async with contextlib.aclosing(openenv_gym.rollouts("openenv/echo", policy, num_envs=4, group_size=4,
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

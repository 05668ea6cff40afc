"""Env servers on a real local Ray cluster: a head and a second node process, one CPU each, on loopback
(benchmarks/ray_cluster.py)."""

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from conftest import ROOT, health, wait_until
from episode_files import VariedPolicy
from openai_server import ScriptedServer
from verifiers_front import rewards_of, verifiers_runs

import openenv_gym
import openenv_gym.ray as on_ray
from benchmarks import recovery
from benchmarks.ray_cluster import local_cluster, ray


@pytest.fixture(scope="module")
def cluster():
    # the scripted policy of the rollout test must import in Ray's worker processes too
    with local_cluster(pythonpath=[str(ROOT / "tests"), str(ROOT)]) as nodes:
        yield nodes


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"  # a zombie has exited


def test_two_server_actors_on_two_nodes_serve_4096_sessions_without_an_error(cluster):
    with on_ray.serve("echo", num_servers=2) as servers:
        where = servers.where()
        assert len({w["node_id"] for w in where}) == 2  # spread: one server per node
        urls = servers.urls()
        assert urls == [w["url"] for w in where] and all(url.startswith("ws://127.0.0.1:") for url in urls)
        envs = gym.make_vec("openenv/echo", num_envs=4096, base_url=servers)
        envs.reset(seed=0)
        for step in range(3):
            actions = [f"{step}-{i}" for i in range(4096)]
            obs, rewards, terminated, truncated, infos = envs.step(actions)
            assert list(obs) == actions and "_error" not in infos
        assert [health(url)["sessions"] for url in servers.urls()] == [2048, 2048]
        envs.close()
        singles = [gym.make("openenv/echo", base_url=servers) for _ in range(2)]  # single envs take turns
        assert sorted(env.unwrapped.base_url for env in singles) == sorted(urls)
        for env in singles:
            env.reset(seed=0)
            assert env.step("one")[0] == "one"
            env.close()


def test_a_killed_actor_costs_only_its_sessions_one_step_and_ray_restarts_it(cluster):
    with on_ray.serve("echo", num_servers=2) as servers:
        first, second = servers.where()
        envs = gym.make_vec("openenv/echo", num_envs=64, base_url=servers)
        envs.reset(seed=0, options={"max_steps": 4})  # episodes end now and then: envs move only at resets
        ray.kill(servers.actors[1], no_restart=False)
        # ray.kill returns before the actor is gone: stepping meanwhile, the envs could reach their autoreset (every
        # 4 steps) first, and a reset moves to the live server without an error
        assert wait_until(lambda: not _alive(second["server_pid"]), timeout=30)
        failed = np.zeros(64, dtype=bool)
        moved_from, steps = set(), 0
        while steps < 200:  # bounded: recovery takes a few steps, each fast
            obs, rewards, terminated, truncated, infos = envs.step([f"s{steps}"] * 64)
            steps += 1
            if "_error" in infos:
                assert set(infos["error"]["code"][infos["_error"]]) == {"ConnectionLostError"}
                failed |= infos["_error"]
            if "_moved" in infos:
                moved_from |= set(infos["moved"]["from"][infos["_moved"]])
            if failed.any() and "_error" not in infos and len(servers.urls()) == 2 and \
                    servers.urls()[1] != second["url"] and health(servers.urls()[1])["sessions"] > 0:
                break
        assert failed.tolist() == [False] * 32 + [True] * 32  # only the killed server's envs saw an error
        assert moved_from == {second["url"]}
        restarted = servers.where()[1]
        assert restarted["actor_pid"] != second["actor_pid"] and restarted["url"] != second["url"]
        assert not _alive(second["server_pid"])  # the old server went with its actor
        obs, *_, infos = envs.step(["last"] * 64)
        assert "_error" not in infos
        assert sum(health(url)["sessions"] for url in servers.urls()) == 64  # every env has a live session
        envs.close()
        assert first["url"] in servers.urls()


@pytest.mark.bench  # (a fault test under load, 19 s: make bench runs it, so that make test stays within 20 minutes)
@pytest.mark.timeout(600)
def test_actors_killed_again_and_again_under_load_never_raise_from_step(cluster):
    """5 rounds, every core busy at each kill: one of two server actors killed mid-step, restarted by Ray
    (benchmarks.recovery, in `make bench`, runs 20)."""
    rounds = recovery.on_ray(rounds=5, num_envs=64, deadline=60)
    assert [r["exceptions"] for r in rounds] == [[]] * 5
    assert all(r["seconds"] is not None and r["lost_env_steps"] + r["retries"] > 0 for r in rounds), rounds
    assert all(r["back_with_sessions_s"] is not None for r in rounds), rounds  # the victim took envs again each time


def test_shutdown_leaves_no_actor_and_no_process(cluster):
    servers = on_ray.serve("echo", num_servers=2)
    where = servers.where()
    actors = list(servers.actors)
    servers.shutdown()
    for w in where:
        assert wait_until(lambda w=w: not _alive(w["server_pid"]) and not _alive(w["actor_pid"]), timeout=30)
    for actor in actors:
        with pytest.raises(ray.exceptions.RayActorError):
            ray.get(actor.url.remote(), timeout=30)
    assert wait_until(lambda: ray.available_resources().get("CPU") == 2.0, timeout=30)  # every CPU given back
    assert servers.urls() == [] and len(servers) == 0
    servers.shutdown()  # twice is harmless


def test_a_server_that_cannot_start_says_why_and_leaves_nothing(cluster):
    with pytest.raises(openenv_gym.ServerStartError, match="no environment named 'no-such-env'"):
        on_ray.serve("no-such-env", num_servers=1)
    assert wait_until(lambda: ray.available_resources().get("CPU") == 2.0, timeout=30)


def test_rollouts_as_ray_tasks_play_every_episode_once(cluster):
    with on_ray.serve("guess", num_servers=1) as servers:
        episodes = list(on_ray.rollouts("openenv/guess", VariedPolicy(), base_url=servers, num_workers=2,
                                        num_envs=8, episodes=40, seed=100, max_turns=8, num_cpus=0.25))
    assert sorted(e.seed for e in episodes) == list(range(100, 140))  # each once, seeds as one stream's
    assert {e.env_index for e in episodes} <= set(range(8))
    played = [e for e in episodes if e.error is None]
    assert played and all(e.steps >= 1 and e.messages for e in played)


def test_the_cli_serves_on_ray_until_interrupted(cluster):
    environment = os.environ | {"RAY_ADDRESS": cluster.address}
    process = subprocess.Popen([sys.executable, "-m", "openenv_gym", "serve", "echo", "--ray", "--num-servers", "2",
                                "--verifiers-port", "0"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment)
    try:
        header = process.stdout.readline()
        assert "serving echo on 2 Ray actors" in header, process.stderr.read() if process.poll() else header
        urls, fronts = zip(*(process.stdout.readline().split() for _ in range(2)), strict=True)  # (URL, front end)
        assert verifiers_runs(fronts[0], "http://127.0.0.1:9/v1", "m", []) == [{"healthy_after": True}]
        env = gym.make("openenv/echo", base_url=urls[1])
        env.reset(seed=0)
        assert env.step("hello")[0] == "hello"
        env.close()
        process.send_signal(signal.SIGINT)
        out, _ = process.communicate(timeout=60)
        assert "stopped every server" in out and process.returncode == 0
        assert wait_until(lambda: ray.available_resources().get("CPU") == 2.0, timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_the_cli_on_ray_passes_no_sandbox_to_its_servers(cluster):
    """An agent env's program runs unconfined on a server started with --ray --no-sandbox: in the host's UTS namespace,
    not its sandbox's (whose hostname is "sandbox")."""
    environment = os.environ | {"RAY_ADDRESS": cluster.address}
    process = subprocess.Popen([sys.executable, "-m", "openenv_gym", "serve", str(ROOT / "tests/sandbox_envs/shell"),
                                "--ray", "--no-sandbox"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=environment)
    try:
        header = process.stdout.readline()
        assert "on 1 Ray actors" in header, process.stderr.read() if process.poll() else header
        url = process.stdout.readline().strip()

        async def hostname() -> str:
            async with openenv_gym.connect(url) as conn:
                session = conn.session()
                await session.reset(options={"index": 0})
                return (await session.step("hostname"))[0]
        assert asyncio.run(hostname()) == f"exit 0\n{os.uname().nodename}\n"
    finally:
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=60)


def test_the_cli_on_ray_passes_the_engine_to_its_servers(cluster):
    """--engine reaches each server on Ray: served with it, an environment that has no images is refused there,
    saying why."""
    done = subprocess.run([sys.executable, "-m", "openenv_gym", "serve", "echo", "--ray", "--engine", "docker"],
                          capture_output=True, text=True, timeout=300,
                          env=os.environ | {"RAY_ADDRESS": cluster.address})
    assert done.returncode != 0
    said = done.stdout + done.stderr
    assert "--engine is for Harbor tasks and OpenEnv projects imported into images" in said, done.stderr[-2000:]


@pytest.mark.bench  # (22 s: make test's CLI test checks a front end on Ray answers; this plays episodes through two)
def test_servers_on_ray_serve_verifiers_env_server_protocol_too(cluster):
    """Each server's Verifiers front end (prime-rl's env servers) on its node: Verifiers' EnvClient plays episodes
    through each, the model that of the run's request."""
    with on_ray.serve("guess", num_servers=2, verifiers=True, max_concurrent=8) as servers, \
            ScriptedServer() as model:
        addresses = servers.verifiers_addresses()
        assert len(set(addresses)) == 2 and [where["verifiers"] for where in servers.where()] == addresses
        for address in addresses:
            runs = verifiers_runs(address, model.url, "guesser", [{"seed": 1}, {"seed": 2}])
            assert all(reward > 0 for reward in rewards_of(runs))


def test_cli_refuses_ray_flags_that_make_no_sense():
    done = subprocess.run([sys.executable, "-m", "openenv_gym", "serve", "echo", "--ray", "--port", "9000"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "--host and --port do not go with --ray" in done.stderr
    done = subprocess.run([sys.executable, "-m", "openenv_gym", "serve", "echo", "--num-servers", "3"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "go with --ray" in done.stderr
    done = subprocess.run([sys.executable, "-m", "openenv_gym", "serve", "echo", "--ray", "--verifiers-port", "9000"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "with --ray, --verifiers-port is 0" in done.stderr


def test_ray_workers_share_one_sampler_and_the_driver_keeps_what_it_learned(cluster):
    from openenv_gym.sampling import CurriculumSampler

    tasks = [{"low": 1, "high": high} for high in (2, 3, 5, 50)]
    sampler = CurriculumSampler(tasks, group_size=2, seed=0)
    with on_ray.serve("guess", num_servers=1) as servers:
        groups = list(on_ray.rollouts("openenv/guess", VariedPolicy(), base_url=servers, num_workers=2, num_envs=4,
                                      episodes=8, group_size=2, sampler=sampler, seed=7, max_turns=4, num_cpus=0.25))
    assert len(groups) == 8 and all(len(group.episodes) == 2 for group in groups)
    for group in groups:  # both members of a group played the task the actor's sampler chose
        played = [{key: e.options[key] for key in ("low", "high")} for e in group.episodes]
        assert played[0] == played[1] and played[0] in tasks
    assert sampler.metrics()["groups"] == 8 and sampler.played.sum() == 8  # learned in the actor, back in the driver

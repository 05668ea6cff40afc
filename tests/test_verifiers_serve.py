"""Every environment served to Verifiers' own env-server client: `serve ENV --verifiers-port P` runs Verifiers' own
server (verifiers 0.4's serve_env, a pool of two) on openenv_gym_verifiers' taskset, each run an episode of ENV.

Real parts only: our server, Verifiers' server and its EnvClient (what prime-rl's orchestrator calls) in the front
end's venv (benchmarks/verifiers_client.py), a scripted model server on loopback. The oracle for what a run plays:
rollouts() of the same env, seeds and model, over our own protocol; for a Verifiers v1 env, Verifiers' own env
server on it (benchmarks/verifiers_env_server.py).
"""

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading

import gymnasium as gym
import pytest
from conftest import ROOT, descendants, scrape, wait_until
from openai_server import ScriptedServer
from verifiers_front import FRONT_END, front_end_python
from verifiers_front import verifiers_runs as front_runs

from openenv_gym import OpenAIPolicy, rollouts
from openenv_gym.client.local import LocalServer
from openenv_gym.errors import EnvError
from openenv_gym.importers import import_environment
from openenv_gym.manifests import load_manifest
from openenv_gym.manifests.venvs import ensure_venv

SEEDS = range(1, 7)
HIGHER_LOWER = ROOT / "tests" / "verifiers_v1_envs" / "higher_lower"
WORD_ECHO = ROOT / "tests" / "verifiers_v1_envs" / "word_echo"
CAPITALS = ROOT / "tests" / "verifiers_v1_envs" / "capitals"
TWO_SEATS = ROOT / "tests" / "verifiers_v1_envs" / "two_seats"
pytestmark = pytest.mark.env_venvs(HIGHER_LOWER, WORD_ECHO, CAPITALS, TWO_SEATS)


@pytest.fixture(scope="module")
def front():
    """(ws url, the Verifiers front end's address, its venv's python) of a server of `guess`."""
    python = front_end_python()
    server = LocalServer("guess", 2, 1000, *FRONT_END, "--verifiers-workers", "2")
    yield server.url, server.status["verifiers"], python
    server.stop()


def verifiers_runs(front, model_url: str, model: str, tasks: list | None = None, cancel_after: float | None = None,
                   taskset: tuple | None = None) -> list:
    _, address, python = front
    return front_runs(address, model_url, model, tasks, cancel_after, taskset, python)


def said(messages: list) -> list:
    """What a conversation says, however each side writes a message: role, text, tool calls (name, arguments)."""
    return [(m["role"], m.get("content") or "", [(c["function"]["name"], json.loads(c["function"]["arguments"]))
                                                 for c in m.get("tool_calls") or ()]) for m in messages]


def test_each_run_plays_the_episode_rollouts_plays_with_the_same_seed_and_model(front):
    """The model saw the conversation rollouts() gives it, turn for turn (the tools offered, each answer a tool
    message), and the trace's reward is the episode's return."""
    url = front[0]
    with ScriptedServer() as model:
        runs = verifiers_runs(front, model.url, "guesser", [{"seed": seed} for seed in SEEDS])

        async def ours():
            return [e async for e in rollouts("openenv/guess", OpenAIPolicy(model.url, "guesser"), num_envs=3,
                                              episodes=len(SEEDS), seed=SEEDS[0], base_url=url)]
        episodes = {e.seed: e for e in asyncio.run(ours())}
    assert runs.pop() == {"healthy_after": True}
    for seed, run in zip(SEEDS, runs, strict=True):
        episode = episodes[seed]
        [trace] = run["traces"]
        assert run["ok"] and trace["ok"] and not run["errors"], run
        assert trace["reward"] == pytest.approx(episode.total_reward) and trace["rewards"] == {
            "reward": pytest.approx(episode.total_reward)}
        assert said(trace["messages"]) == said(episode.messages[:-1])  # (not the last answer: no model saw it)
        assert trace["calls"] == len(episode.rewards) > 1 and trace["stop_condition"] == "user_closed"


def test_bad_task_data_and_env_errors_are_answered_and_the_server_goes_on(front):
    """task_data that is no task of the taskset: the reply's success is false with the reason (EnvClient raises
    it); reset options the env refuses: the episode is not ok, the env's error in it; then runs play again."""
    with ScriptedServer() as model:
        bad, refused, fine, health = verifiers_runs(front, model.url, "guesser", [
            {"seed": "soon"}, {"split": "train", "index": 3}, {"seed": 1}])
    assert "OpenEnvGymData" in bad["error"] and "seed" in bad["error"] and "valid integer" in bad["error"]
    assert not refused["ok"] and not refused["traces"]
    [error] = refused["errors"]
    assert "guess does not understand the reset options 'index', 'split'" in error
    assert fine["ok"] and fine["traces"][0]["reward"] > 0 and health == {"healthy_after": True}


def test_a_cancelled_run_frees_its_session_at_once(front):
    """The client gives up on runs whose model is slow: Verifiers' cancel reaches the run, whose session closes
    while the model is still thinking (each turn takes 4 s: the episodes would need many)."""
    url = front[0]
    open_during = []
    with ScriptedServer() as model:
        watch = threading.Thread(target=lambda: open_during.append(
            wait_until(lambda: scrape(url)[("openenv_gym_sessions", ())] == 3.0, timeout=20)))
        watch.start()
        cancelled = verifiers_runs(front, model.url, "slow-4000", [{"seed": s} for s in (1, 2, 3)], cancel_after=2.0)
        watch.join()
        assert wait_until(lambda: scrape(url)[("openenv_gym_sessions", ())] == 0.0, timeout=1.5)
    assert open_during == [True] and cancelled == [{"cancelled": True}] * 3 + [{"healthy_after": True}]


@contextlib.contextmanager
def verifiers_own(source, scratch, config: dict | None = None):
    """(its import's folder, its venv's python, Verifiers' own env server on it: its address), then stopped."""
    folder = import_environment(source, source.name, scratch, check=False)[0].folder
    python = str(ensure_venv(load_manifest(folder)))
    theirs = subprocess.Popen([python, "-m", "benchmarks.verifiers_env_server", str(source), source.name,
                               *(("--config", json.dumps(config)) if config else ())],
                              cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        yield folder, python, theirs.stdout.readline().split()[1]
    finally:
        theirs.stdin.close()
        theirs.wait(30)


@pytest.fixture(scope="module")
def higher_lower(tmp_path_factory):
    with verifiers_own(HIGHER_LOWER, tmp_path_factory.mktemp("v1")) as served:
        yield served


# how each v1 env is played: (its model, the tasks of its taskset); "script:lookup" calls the tool as a model writes it
V1_PLAYS = {HIGHER_LOWER: ("m", [0, 3]), WORD_ECHO: ("m", [0, 3]), CAPITALS: ("script:lookup", [2])}
LOOKUP = [{"name": "atlas_capital", "arguments": {"country": "kenya"}},
          "The capital is Nairobi. Off the record: I knew it."]  # (its intercept keeps what comes before)


@pytest.fixture(scope="module", ids=lambda source: source.name, params=[
    HIGHER_LOWER, CAPITALS, pytest.param(WORD_ECHO, marks=pytest.mark.bench)])  # (make test's 20 minutes: 30 s)
def v1_env(request, tmp_path_factory):
    """A v1 env that plays the user (higher_lower), one whose task has a prompt of its own (word_echo), one whose
    task offers a tool of its own (capitals)."""
    if request.param == HIGHER_LOWER:  # (the one the module serves already)
        yield request.param, *request.getfixturevalue("higher_lower")
        return
    with verifiers_own(request.param, tmp_path_factory.mktemp("v1")) as served:
        yield request.param, *served


def test_a_v1_env_plays_as_under_verifiers_own_env_server(v1_env):
    """A Verifiers v1 env behind Verifiers' own env server and behind our front end, driven by the same EnvClient
    with task_data dumped from its taskset as prime-rl dumps it, and the same scripted model (streamed, as the null
    harness asks): the same messages (a tool call's id and arguments as the model wrote them, a reply as the env's
    own intercept took it), rewards, metrics and stop; a run that raises fails on both, saying why; a model server
    that drops the connection is tried three times, and the run fails unscored."""
    source, folder, python, address = v1_env
    model, indices = V1_PLAYS[source]
    broken = [{"idx": 9, "name": "secret-0", "prompt": None, "system_prompt": "Guess.", "secret": 0}] \
        if source == HIGHER_LOWER else None  # (then a run that raises)
    runs, failed, dropped = {}, {}, {}
    with LocalServer(str(folder), 1, 100, *FRONT_END) as server:
        for side, where in {"ours": server.status["verifiers"], "theirs": address}.items():
            with ScriptedServer({"lookup": LOOKUP}) as scripted:  # (a model each: its calls' ids count its requests)
                played = verifiers_runs((None, where, python), scripted.url, model, broken, taskset=(source, indices))
                if broken:
                    failed[side] = played.pop(-2)
                runs[side] = played
            if source == CAPITALS:  # (a model with no script, whose server drops the connection; on its own, as
                with ScriptedServer() as scripted:  # its requests would count in the other run's calls' ids)
                    dropped[side] = verifiers_runs((None, where, python), scripted.url, "script:missing",
                                                   taskset=(source, indices))[0]
    assert runs["ours"] == runs["theirs"] and dropped.get("ours") == dropped.get("theirs")
    if source == CAPITALS:  # (tried three times, the run fails unscored)
        [trace] = dropped["ours"]["traces"]
        assert (trace["stop_condition"], trace["calls"], trace["rewards"]) == ("provider_error", 3, {})
    assert all(run["ok"] and run["traces"][0]["calls"] for run in runs["ours"][:-1])
    if source == CAPITALS:
        [run, _] = runs["ours"]
        call = run["traces"][0]["messages"][1]["tool_calls"][0]
        assert call["function"]["arguments"] == '{"country": "kenya"}' and run["traces"][0]["rewards"] == {
            "correct": 1.0}
        assert run["traces"][0]["messages"][-1] == {"role": "assistant", "content": "The capital is Nairobi."}
    elif source == WORD_ECHO:  # (its task's prompt opens the exchange: one turn, scored on it)
        assert [run["traces"][0]["messages"][-2]["content"] for run in runs["ours"][:-1]] == [
            "The word is: apple", "The word is: cloud"]
    else:
        lost, found, health = runs["ours"]
        assert [run["traces"][0]["rewards"] for run in (lost, found)] == [{"found": 0.0}, {"found": 1.0}]
        assert lost["traces"][0]["metrics"] == {"guesses": 6.0} and lost["traces"][0]["calls"] == 6
        assert found["traces"][0]["messages"][0]["role"] == "system" and health == {"healthy_after": True}
        for side, run in failed.items():
            assert not run["ok"] and "the secret 0 is not a number from 1 to 100" in run["errors"][0], side


def test_an_episode_of_several_agents_gives_a_trace_per_agent_as_under_verifiers_own_env_server(tmp_path):
    """A v1 env of two seats (two_seats), its second pinned to a model of its own, both sides given that config:
    each seat's run is a trace of its own, stamped with its seat, in the episode's order, scored by its task and by
    the env's finalize, calling its own model; seats run one after the other or held open together; a run that
    raises after a seat ended keeps that seat's trace, scored, and fails with the env's own error."""
    pinned = {"second": {"model": "script:no"}}
    runs = {}
    with verifiers_own(TWO_SEATS, tmp_path, pinned) as (folder, python, address), \
            LocalServer(str(folder), 1, 100, *FRONT_END, "--env-args", json.dumps(pinned)) as server:
        env = gym.make("openenv/remote", base_url=server.url)  # (as a gym env: which seat asks, which model)
        _, info = env.reset(options={"task": 0})
        asking = [(info["trace"]["agent"], info.get("model"))]
        _, _, _, _, info = env.step("yes")
        asking.append((info["trace"]["agent"], info.get("model")))
        _, reward, terminated, _, info = env.step("yes")
        env.close()
        assert asking == [("first", None), ("second", "script:no")] and terminated and reward == 1.5
        assert [(t["agent"], t["rewards"]) for t in info["traces"]] == [
            ("first", {"said_yes": 1.0, "agreed": 1.0}), ("second", {"said_yes": 1.0, "agreed": 1.0})]
        for side, where in {"ours": server.status["verifiers"], "theirs": address}.items():
            with ScriptedServer({"yes": ["yes", "yes, agreed"], "no": ["no"]}) as scripted:
                runs[side] = verifiers_runs((None, where, python), scripted.url, "script:yes",
                                            taskset=(TWO_SEATS, [0, 1, 2]))
    assert runs["ours"] == runs["theirs"]
    one_after, together, broken, health = runs["ours"]
    assert [(t["agent"], t["messages"][-1]["content"], t["rewards"]) for t in one_after["traces"]] == [
        ("first", "yes", {"said_yes": 1.0, "agreed": 0.0}), ("second", "no", {"said_yes": 0.0, "agreed": 0.0})]
    assert one_after["traces"][1]["messages"][0]["content"] == "The first seat said: yes. Do you agree?"
    assert [(t["agent"], t["calls"], t["metrics"], t["info"]) for t in together["traces"]] == [
        ("second", 1, {"replies": 1.0}, {"seats": 2}), ("first", 2, {"replies": 2.0}, {"seats": 2})]
    assert together["traces"][1]["messages"][-2:] == [{"role": "user", "content": "The second seat said: no"},
                                                     {"role": "assistant", "content": "yes, agreed"}]
    assert not broken["ok"] and broken["errors"] == [
        "EnvError: TwoSeatsEnv.run(): ValueError: the first seat's answer leaves the second nothing to do"]
    assert [(t["agent"], t["rewards"]) for t in broken["traces"]] == [("first", {"said_yes": 1.0})]
    assert one_after["ok"] and together["ok"] and health == {"healthy_after": True}


def test_a_v1_env_server_is_a_gym_environment_each_model_call_a_step(higher_lower):
    """openenv/verifiers-remote over Verifiers' own env server: its rollouts' model calls are the steps, the
    catalog is the taskset named, and the vector client and rollouts() play it as any env."""
    _, _, address = higher_lower
    remote = {"address": address, "taskset": {"id": "higher_lower"}, "taskset_path": str(HIGHER_LOWER)}
    env = gym.make("openenv/verifiers-remote", **remote)
    obs, info = env.reset(options={"task": 3})
    assert "first guess" in obs.lower() and info["messages"][0]["role"] == "system"
    _, reward, terminated, _, info = env.step("Is it 50?")
    assert (reward, terminated, info["rewards"], info["metrics"]) == (1.0, True, {"found": 1.0}, {"guesses": 1.0})
    obs, _ = env.reset(options={"task": 0})
    _, reward, terminated, _, _ = env.step("50")
    assert (reward, terminated) == (0.0, False) and "lower" in env.unwrapped._last_obs.lower()
    env.close()
    with ScriptedServer() as model:
        async def played():  # (one turn each: the many turns of task 0 were stepped above)
            return [e async for e in rollouts("openenv/verifiers-remote", OpenAIPolicy(model.url, "m"), num_envs=2,
                                              tasks=[{"task": 3}, {"task": "secret-50"}], env_args=remote)]
        episodes = asyncio.run(played())
    assert [(e.total_reward, e.info["metrics"]["guesses"], e.error) for e in episodes] == [(1.0, 1.0, None)] * 2
    nowhere = gym.make("openenv/verifiers-remote", **{**remote, "address": "tcp://127.0.0.1:9"})
    with pytest.raises(EnvError, match=r"no Verifiers env server answers at tcp://127\.0\.0\.1:9 "):
        nowhere.reset()
    nowhere.close()


def test_the_front_end_does_not_outlive_its_server():
    server = LocalServer("echo", 1, 10, *FRONT_END)
    family = descendants(server.process.pid)
    front_ends = [pid for pid in family if "openenv_gym_verifiers.serve" in _command(pid)]
    assert len(front_ends) == 1
    os.kill(server.process.pid, signal.SIGKILL)  # (no teardown: only its lifeline ends the front end)
    assert wait_until(lambda: not any(os.path.exists(f"/proc/{pid}") and "zombie" not in _state(pid)
                                      for pid in family), timeout=20)
    server.process.wait()


def test_its_options_go_with_verifiers_port():
    done = subprocess.run([sys.executable, "-m", "openenv_gym", "serve", "echo", "--max-concurrent", "4"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "--verifiers-workers and --max-concurrent go with --verifiers-port" in done.stderr


def _command(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as file:
            return file.read().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/status") as file:
            return next(line for line in file if line.startswith("State:")).lower()
    except (OSError, StopIteration):
        return "gone"


def test_the_front_ends_memo_of_pydantics_default_factory_check_gives_pydantics_answers():
    """The front end keeps pydantic's answer per default factory (speedups.py): the same answers as pydantic's own
    check, for factories that take the validated data and those that do not, hashable or not."""
    script = """
import functools, json
from pydantic._internal import _fields
factories = [list, dict, lambda: 1, lambda data: data, functools.partial(dict, a=1), type("Unhashable", (), {
    "__hash__": None, "__call__": lambda self, data: data})()]
theirs = [_fields.takes_validated_data_argument(f) for f in factories]
from openenv_gym_verifiers.speedups import memoize_default_factory_check
memoize_default_factory_check()
memoize_default_factory_check()  # (once is enough: a second call keeps the first memo)
ours = [[_fields.takes_validated_data_argument(f) for f in factories] for _ in range(2)]
print(json.dumps([theirs, ours, _fields.takes_validated_data_argument.__closure__ is not None]))
"""
    done = subprocess.run([front_end_python(), "-c", script], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    theirs, ours, memoized = json.loads(done.stdout)
    assert theirs == [False, False, False, True, False, True] and ours == [theirs, theirs] and memoized

"""ORS environments imported and served: real `openreward` / `ors-sdk` in the environments' own venvs."""

import asyncio
import json
from pathlib import Path

import gymnasium as gym
import httpx
import pytest
from conftest import http_url, run
from openai_server import ScriptedServer
from tool_shape import names_of
from verifiers_front import FRONT_END, rewards_of, verifiers_runs

import openenv_gym
from benchmarks.episodes import run_peer
from openenv_gym.client.local import LocalServer
from openenv_gym.importers import import_environment
from openenv_gym.manifests import load_manifest
from openenv_gym.manifests.venvs import ensure_venv
from openenv_gym.registry import register_all

ORS_ENVS = Path(__file__).parent / "ors_envs"
NAMES = ("answer", "treasure", "sums", "notebook")
pytestmark = pytest.mark.env_venvs(*(ORS_ENVS / name for name in NAMES))


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    """Import the test ORS environments once and register their gym ids."""
    out = tmp_path_factory.mktemp("servers")
    for name in NAMES:
        import_environment(ORS_ENVS / name, name, out)
    register_all()
    return out


def test_answer_env_through_gym_make(imported, capfd):
    env = gym.make("openenv/ors-answer")
    assert env.action_space.tool_names == ["answer", "crash", "explain"]
    obs, info = env.reset(seed=0)
    assert obs in {"What is 2 + 3?", "What is 7 * 6?", "Capital of France?"}
    assert [tool["name"] for tool in info.pop("tools")] == ["answer", "crash", "explain"]  # every reset shows them
    assert info["split"] == "train" and "task_spec" not in info and "answer" not in str(info)
    assert env.reset(seed=0)[0] == obs  # the seeded choice is reproducible

    obs, info = env.reset(options={"split": "train", "index": 1})
    assert obs == "What is 7 * 6?" and (info["split"], info["index"]) == ("train", 1)
    assert env.reset(options={"task": "france"})[0] == "Capital of France?"  # a task named by its id
    assert env.reset(options={"task": 0, "split": "test"})[0] == "What is 10 - 4?"  # by its index in a split
    obs, info = env.reset(options={"split": "train", "index": 1})
    obs, reward, terminated, truncated, info = env.step({"name": "answer", "arguments": {"answer": "42"}})
    assert (obs, reward, terminated, truncated) == ("correct", 1.0, True, False) and info["reward_raw"] == 1.0
    with pytest.raises(openenv_gym.NoEpisodeError):
        env.step({"name": "answer", "arguments": {"answer": "42"}})  # refused after finished, as ORS does

    obs, info = env.reset(options={"split": "test", "index": 0, "expose_task": True})
    assert info["task_spec"] == {"question": "What is 10 - 4?", "answer": "6"}
    obs, reward, *_ = env.step('<tool_call>{"name": "answer", "arguments": {"answer": "7"}}</tool_call>')
    assert (obs, reward) == ("wrong", 0.0)

    env.reset(options={"task_spec": {"question": "Say hi", "answer": "hi"}})
    assert env.step("answer(answer='hi')")[1] == 1.0
    env.close()
    assert "tool_call_completed" not in capfd.readouterr().err  # openreward's per-call logging is quiet


def _plays_task_tools(env) -> None:
    """A task offering the task-only `hint` tool lists it in info["tools"] and takes calls to it; others do not."""
    obs, info = env.reset(options={"task_spec": {"question": "Say hi", "answer": "hi", "hint": "a greeting"}})
    assert names_of(info["tools"]) == ["answer", "crash", "explain", "hint"]
    assert env.step({"name": "hint", "arguments": {}})[0] == "a greeting"
    assert env.step('<tool_call>{"name": "hint", "arguments": {}}</tool_call>')[0] == "a greeting"
    obs, info = env.reset(options={"task_spec": {"question": "Say hi", "answer": "hi"}})
    assert names_of(info["tools"]) == ["answer", "crash", "explain"]
    obs, reward, terminated, truncated, info = env.step({"name": "hint", "arguments": {}})
    assert info["error"]["code"] == "invalid_action" and "unknown tool 'hint'" in obs


def test_task_only_tools_are_offered_per_episode(imported):
    env = gym.make("openenv/ors-answer")
    _plays_task_tools(env)
    env.close()


def test_bad_task_options_are_typed_errors(imported):
    env = gym.make("openenv/ors-answer")
    env.reset(seed=1)  # (Gymnasium's passive checker trips over a failing *first* reset, so start with a good one)
    with pytest.raises(openenv_gym.BadRequestError, match="unknown split 'dev'; splits: train, test"):
        env.reset(options={"split": "dev"})
    with pytest.raises(openenv_gym.BadRequestError, match="out of range"):
        env.reset(options={"split": "test", "index": 5})
    _refuses_what_it_does_not_understand(env)
    env.reset(options={"split": "test", "index": 0})  # the env still works
    obs, reward, terminated, truncated, info = env.step({"name": "nope", "arguments": {}})
    assert info["error"]["code"] == "invalid_action" and not terminated
    env.close()


def _refuses_what_it_does_not_understand(env) -> None:
    """An option the env does not read is refused with those it does, never ignored; a seed is no option."""
    understood = "expose_answer, expose_task, group, index, max_steps, secrets, split, task, task_spec"
    with pytest.raises(openenv_gym.BadRequestError, match=f"'level'; it understands: env_seconds, "
                                                          f"episode_id, {understood}"):
        env.reset(options={"level": 3, "split": "test"})
    with pytest.raises(openenv_gym.BadRequestError, match=r"reset's own argument.*reset\(seed=3"):
        env.reset(options={"seed": 3})
    with pytest.raises(openenv_gym.BadRequestError, match="no task of split 'train' has the id or name 'paris'"):
        env.reset(options={"task": "paris"})
    with pytest.raises(openenv_gym.BadRequestError, match="task and index both"):
        env.reset(options={"task": 1, "index": 1})


OPPOSITE = {"north": "south", "east": "west", "south": "north", "west": "east"}


def greedy_hunt(env):
    """Move while some direction earns the closer-reward; dig when the treasure is 0 away.
    Returns the rewards of the moves and the final dig step."""
    move_rewards = []
    while "0 away" not in env.step({"name": "look", "arguments": {}})[0]:
        for direction in ("north", "east", "south", "west"):
            reward = env.step({"name": "move", "arguments": {"direction": direction}})[1]
            move_rewards.append(reward)
            if reward > 0:
                break
            env.step({"name": "move", "arguments": {"direction": OPPOSITE[direction]}})
    return move_rewards, env.step({"name": "dig", "arguments": {}})


def test_multi_tool_game_with_dense_rewards_on_ors_sdk(imported):
    import random

    far = next(i for i in range(5) if (random.Random(i).randrange(4), random.Random(i).randrange(4)) != (0, 0))
    env = gym.make("openenv/ors-treasure")
    assert env.action_space.tool_names == ["dig", "look", "move"]  # ORS lists tools alphabetically
    obs, info = env.reset(options={"split": "train", "index": far})
    assert "4x4 grid" in obs
    move_rewards, (obs, reward, terminated, truncated, info) = greedy_hunt(env)
    assert (obs, reward, terminated) == ("treasure!", 1.0, True)
    assert move_rewards and set(move_rewards) <= {0.1, -0.1} and 0.1 in move_rewards  # dense
    env.reset(options={"index": far})
    assert env.step({"name": "dig", "arguments": {}})[1:3] == (-0.2, False)
    assert env.step({"name": "move", "arguments": {"direction": "up"}})[1] == -0.05
    env.close()


def test_make_vec_runs_ors_sessions(imported):
    envs = gym.make_vec("openenv/ors-treasure", num_envs=4)
    obs, infos = envs.reset(seed=0)
    assert len(obs) == 4 and infos["split"].tolist() == ["train"] * 4
    obs, rewards, terminated, truncated, infos = envs.step([{"name": "look", "arguments": {}}] * 4)
    assert all("away" in o for o in obs) and (rewards == 0.0).all() and infos["_reward_raw"].all()
    envs.close()


def test_num_tasks_get_task_only_env_and_the_catalog(imported, start_server):
    env = gym.make("openenv/ors-sums")
    obs, info = env.reset(seed=3)
    assert obs.startswith("What is") and 0 <= info["index"] < 1_000_000
    a, b = (int(x) for x in obs.removeprefix("What is ").rstrip("?").split(" + "))
    assert env.step({"name": "submit", "arguments": {"value": a + b}})[1] == 1.0
    url = env.unwrapped.base_url

    async def catalog(url):
        async with openenv_gym.connect(url) as conn:
            return await conn.splits(), await conn.tasks("test", 0, 3), await conn.tasks(start=5, stop=6)

    splits, tasks, first = run(catalog(url))
    assert splits == [{"name": "train", "type": "train", "num_tasks": 1_000_000},
                      {"name": "test", "type": "test", "num_tasks": 1_000_000}]
    assert tasks == [{"index": 0}, {"index": 1}, {"index": 2}] and first == [{"index": 5}]  # specs hold answers
    http = httpx.get(http_url(url) + "/tasks", params={"split": "test", "start": 1, "stop": 2}).json()
    assert http == {"split": "test", "start": 1, "tasks": [{"index": 1}], "hidden": True}
    assert httpx.get(http_url(url) + "/splits").json()["splits"] == splits
    bad = httpx.get(http_url(url) + "/tasks", params={"split": "dev"})
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "bad_request"
    whole = httpx.get(http_url(url) + "/tasks", params={"start": 999_000}).json()
    assert len(whole["tasks"]) == 1000 and whole["tasks"][-1] == {"index": 999_999}  # one listing is bounded
    env.close()

    revealing = start_server("ors-sums", "--reveal-tasks")  # the operator opts in
    _, tasks, first = run(catalog(revealing))
    assert tasks[0] == {"a": 0, "b": 0} and first == [{"a": 35, "b": 65}]
    http = httpx.get(http_url(revealing) + "/tasks", params={"split": "test", "start": 1, "stop": 2}).json()
    assert http == {"split": "test", "start": 1, "tasks": [{"a": 7, "b": 13}], "hidden": False}


def test_concurrent_sessions_keep_their_own_state_and_secrets_stay_secret(imported, capfd):
    env = gym.make("openenv/ors-notebook")
    url = env.unwrapped.base_url

    async def two_sessions():
        async with openenv_gym.connect(url) as conn:
            ada, bob = conn.session(), conn.session()
            (ada_obs, _), (bob_obs, bob_info) = await asyncio.gather(
                ada.reset(options={"index": 0, "secrets": {"API_KEY": "s3cr3t-value"}}),
                bob.reset(options={"index": 1}))
            await asyncio.gather(ada.step({"name": "write", "arguments": {"text": "from ada"}}),
                                 bob.step({"name": "write", "arguments": {"text": "from bob"}}))
            await ada.step({"name": "write", "arguments": {"text": "again ada"}})
            ada_notes, bob_notes = await asyncio.gather(ada.step("read()"), bob.step("read()"))
            await bob.close()  # its async teardown runs, after the close is answered
            for _ in range(50):  # so look a few times (a bounded wait, on a loaded machine)
                after = await ada.step("read()")
                if not after[0].endswith("(teardowns: 0)"):
                    break
                await asyncio.sleep(0.02)
            return ada_obs, bob_obs, bob_info, ada_notes[0], bob_notes[0], after[0]

    ada_obs, bob_obs, bob_info, ada_notes, bob_notes, after = run(two_sessions())
    assert ada_obs == "Notebook of ada. API key given: True." and bob_obs.endswith("API key given: False.")
    assert ada_notes.startswith("from ada | again ada (") and bob_notes.startswith("from bob (")
    assert int(after.rsplit("teardowns: ", 1)[1].rstrip(")")) >= 1
    env.close()
    captured = capfd.readouterr()
    assert "s3cr3t-value" not in captured.out + captured.err  # never logged or echoed
    assert "tool" not in captured.err.lower()  # the SDK's per-call logging is quiet


@pytest.fixture(scope="module")
def openreward_server(imported):
    """openreward's own Server with the answer env, on loopback, in the env's venv."""
    from benchmarks.ors_compare import sdk_server
    from openenv_gym.manifests import load_manifest
    from openenv_gym.manifests.venvs import ensure_venv

    python = ensure_venv(load_manifest(imported / "answer"))
    with sdk_server(python, ORS_ENVS / "answer", "answer_env:AnswerEnv") as url:
        yield url


def test_the_verifiers_front_end_ends_each_run_with_the_reward_openrewards_own_client_gets(imported,
                                                                                         openreward_server):
    """Verifiers' EnvClient (as prime-rl drives it) runs episodes of the answer env through our front end, a scripted
    model replying; the same tool calls through openreward's own client on openreward's own Server: the same
    rewards."""
    plays = {"right": ({"split": "train", "index": 1}, [call("answer", answer="42")]),
             "wrong": ({"task": "france"}, [call("explain"), call("answer", answer="Lyon")]),  # (by its id)
             "spaced": ({"split": "test", "index": 0}, [call("answer", answer=" 6 ")])}
    with LocalServer(str(imported / "answer"), 1, 100, *FRONT_END) as server, \
            ScriptedServer({name: calls for name, (_, calls) in plays.items()}) as model:
        runs = verifiers_runs(server.status["verifiers"], model.url, [f"script:{name}" for name in plays],
                              [task for task, _ in plays.values()])
    python = ensure_venv(load_manifest(imported / "answer"))
    as_split = {"task": "france"}, {"split": "train", "index": 2}  # (openreward's session takes a split's index)
    theirs = run_peer(python, "benchmarks.openreward_peer", openreward_server, "answerenv", "--plays", json.dumps(
        [(as_split[1] if task == as_split[0] else task, calls) for task, calls in plays.values()]))
    assert rewards_of(runs) == theirs == [1.0, 0.0, 1.0]


def call(name: str, **arguments) -> dict:
    return {"name": name, "arguments": arguments}


def test_remote_openreward_server_through_gym_make(openreward_server):
    env = gym.make("openenv/ors", base_url=openreward_server, env="AnswerEnv")
    assert env.action_space.tool_names == ["answer", "crash", "explain"]
    assert env.reset(options={"task": "france"})[0] == "Capital of France?"  # by id, from the server's catalog
    obs, info = env.reset(options={"split": "train", "index": 1})
    assert obs == "What is 7 * 6?" and (info["split"], info["index"]) == ("train", 1)
    obs, reward, terminated, truncated, info = env.step({"name": "answer", "arguments": {"answer": "42"}})
    assert (obs, reward, terminated, truncated) == ("correct", 1.0, True, False) and info["reward_raw"] == 1.0
    with pytest.raises(openenv_gym.NoEpisodeError):
        env.step({"name": "answer", "arguments": {"answer": "42"}})
    _refuses_what_it_does_not_understand(env)
    obs, info = env.reset(seed=0)
    assert info["split"] == "train" and "task_spec" not in info
    assert env.reset(seed=0)[0] == obs  # seeded choice is reproducible
    obs, info = env.reset(options={"split": "test", "index": 0, "expose_task": True})
    assert info["task_spec"] == {"question": "What is 10 - 4?", "answer": "6"}
    obs, reward, terminated, *_ = env.step("nonsense")
    assert obs.startswith("Invalid action") and not terminated
    assert env.step('<tool_call>{"name": "answer", "arguments": {"answer": "6"}}</tool_call>')[1] == 1.0
    with pytest.raises(openenv_gym.BadRequestError, match="unknown split"):
        env.reset(options={"split": "dev"})
    env.reset(options={"index": 0})
    obs, reward, *_ = env.step({"name": "explain", "arguments": {}})  # joined from several SSE chunks
    assert len(obs) == 10_000 and obs.startswith("0123456789") and reward == 0.0
    with pytest.raises(openenv_gym.EnvError, match="the tool broke"):  # an SSE error event ends the session
        env.step({"name": "crash", "arguments": {}})
    with pytest.raises(openenv_gym.NoEpisodeError):
        env.step({"name": "explain", "arguments": {}})
    _plays_task_tools(env)  # from the server's /task_tools
    env.close()
    env.close()


def test_open_episodes_are_kept_alive_between_calls(openreward_server, monkeypatch):
    """Pings go out while the caller does not call at all (a sync env's loop is idle between calls)."""
    import time

    from openenv_gym.client import ors

    monkeypatch.setattr(ors, "PING_INTERVAL", 0.05)
    keep_alive = ors.KeepAlive()
    monkeypatch.setattr(ors, "keep_alive", keep_alive)
    env = gym.make("openenv/ors", base_url=openreward_server, env="answerenv")
    env.reset(options={"index": 0})
    time.sleep(0.5)
    assert keep_alive.sent >= 3 and keep_alive.failed == 0
    env.close()
    assert keep_alive.sessions == {}


def test_make_vec_against_a_remote_ors_server(openreward_server):
    envs = gym.make_vec("openenv/ors", num_envs=3, base_url=openreward_server, env="answerenv")
    obs, infos = envs.reset(options={"split": "train", "index": 1})
    assert obs == ("What is 7 * 6?",) * 3
    obs, rewards, terminated, truncated, infos = envs.step([{"name": "answer", "arguments": {"answer": a}}
                                                            for a in ("42", "41", "42")])
    assert rewards.tolist() == [1.0, 0.0, 1.0] and terminated.all()
    obs, *_ = envs.step(["ignored"] * 3)  # NEXT_STEP autoreset starts new episodes
    assert all(o.startswith("What is") or o == "Capital of France?" for o in obs)
    envs.close()


def test_openenv_remote_finds_an_ors_server(openreward_server):
    """openenv/remote probes: an ORS server (GET /list_environments) with one environment needs no env=."""
    env = gym.make("openenv/remote", base_url=openreward_server)
    assert env.unwrapped.description["source"] == "ors-http"
    obs, info = env.reset(options={"split": "train", "index": 1})
    assert obs == "What is 7 * 6?"
    assert env.step({"name": "answer", "arguments": {"answer": "42"}})[1:3] == (1.0, True)
    env.close()


def test_cli_bench_drives_a_remote_ors_server(openreward_server):
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "openenv_gym", "bench", "openenv/ors", "--env-url", openreward_server,
                           "--env", "answerenv", "--num-envs", "2", "--seconds", "0.3",
                           "--action", '{"name": "explain", "arguments": {}}'],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "openenv/ors on http://127.0.0.1:" in done.stdout and "n/a (remote)" in done.stdout


READER = '''
from pathlib import Path

from openreward.environments import Environment, TextBlock, ToolOutput, tool

TASKS = [{"file": "data/greeting.txt"}]  # read relative to the working directory, as in its own checkout


class Reader(Environment):
    def __init__(self, task_spec: dict = {}, secrets: dict[str, str] = {}) -> None:  # noqa: B006
        super().__init__(task_spec)
        self.text = Path(task_spec["file"]).read_text()

    @classmethod
    def list_splits(cls):
        return ["train"]

    @classmethod
    def list_tasks(cls, split: str):
        return TASKS

    def get_prompt(self):
        return [TextBlock(text=self.text)]

    @tool
    def done(self) -> ToolOutput:
        """End."""
        return ToolOutput(blocks=[TextBlock(text="bye")], reward=1.0, finished=True)
'''


def test_data_named_relatively_at_import_is_found_relatively_when_served(tmp_path, monkeypatch):
    source = tmp_path / "src"
    source.mkdir()
    (source / "reader.py").write_text(READER)
    (source / "requirements.txt").write_text("openreward\n")  # the answer env's dependency set: its venv
    (tmp_path / "work" / "data").mkdir(parents=True)
    (tmp_path / "work" / "data" / "greeting.txt").write_text("hello from the data folder")
    monkeypatch.chdir(tmp_path / "work")
    import_environment(source, "reader", tmp_path / "out", data=[Path("data/greeting.txt")])
    register_all()
    monkeypatch.chdir(tmp_path)  # the server starts elsewhere: the env's own folder is its working directory
    env = gym.make("openenv/ors-reader")
    obs, _ = env.reset(seed=0)
    assert obs == "hello from the data folder"
    env.close()

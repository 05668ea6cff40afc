"""OpenEnv's clients get OpenEnv's own answers from our server: the same OpenEnv project (tests/openenv_envs/
tally_env, in `openenv init`'s layout) served by OpenEnv 0.10.0's own server and, imported, by ours; the same
messages sent to both over a raw /ws socket, and every answer compared, errors included. The one place the answers
differ on purpose: a reset option the environment's reset does not take, which OpenEnv's server drops without a word
(its users' issues #1102 and #1250) and ours refuses (tests/openenv_envs/quiz_env, a reset of keyword arguments in
the style of reasoning_gym's)."""

import asyncio
import json
from pathlib import Path

import gymnasium as gym
import httpx
import orjson
import pytest
import websockets
from conftest import ROOT, http_url
from openai_server import ScriptedServer
from verifiers_front import FRONT_END, rewards_of, verifiers_runs

import openenv_gym
from benchmarks.openenv_server import openenv_server
from openenv_gym.client.local import LocalServer
from openenv_gym.importers import import_environment
from openenv_gym.manifests import load_manifest
from openenv_gym.manifests.venvs import ensure_venv

TALLY_ENV, QUIZ_ENV = ROOT / "tests" / "openenv_envs" / "tally_env", ROOT / "tests" / "openenv_envs" / "quiz_env"
pytestmark = pytest.mark.env_venvs(TALLY_ENV, QUIZ_ENV)


@pytest.fixture(scope="module")
def imported(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("servers")
    import_environment(TALLY_ENV, "oe-tally", out)
    return out / "oe-tally"


@pytest.fixture(scope="module")
def ours(imported):
    """Our server of the environment, with a Verifiers front end."""
    with LocalServer(str(imported), 1, 100, *FRONT_END) as server:
        yield server


@pytest.fixture(scope="module")
def servers(imported, ours):
    """(OpenEnv's server, ours): http URLs of the same environment."""
    python = ensure_venv(load_manifest(imported))
    with openenv_server(TALLY_ENV, python, max_sessions=8) as (theirs, _):
        yield theirs, http_url(ours.url)


async def _conversation(url: str, messages: list) -> list[dict]:
    """The answer to each message, sent in turn over one /ws socket (a message that is not a dict goes as is)."""
    answers = []
    async with websockets.connect(url.replace("http://", "ws://") + "/ws") as ws:
        for message in messages:
            await ws.send(message if isinstance(message, str) else orjson.dumps(message).decode())
            answers.append(orjson.loads(await ws.recv()))
    return answers


def _comparable(answer: dict) -> dict:
    """An answer as both servers must give it: an error's code (the wording is each server's own, but must name
    what the environment said), everything else as it is."""
    if answer["type"] == "error":
        return {"type": "error", "code": answer["data"]["code"]}
    return answer


CONVERSATION = [
    {"type": "reset", "data": {"seed": 1, "episode_id": "ep-1"}},
    {"type": "step", "data": {"delta": 3}},
    {"type": "step", "data": {"delta": "three"}},  # a wrong type: the Action model refuses it
    {"type": "step", "data": {"delta": 1, "bogus": True}},  # an unknown field: refused too
    {"type": "step", "data": {"delta": 2}},  # the session went on, and the refused actions were no steps
    {"type": "step", "data": {"delta": -1}},  # the environment raises
    {"type": "state"},
    {"type": "step", "data": {"delta": 5, "metadata": {"why": "to finish"}}},  # the same episode goes on
    {"type": "state"},
    {"type": "nope"},
    "not json",
    {"type": "reset", "data": {"episode_id": "ep-2", "start": 4}},  # a reset option the env's reset takes
    {"type": "step", "data": {"delta": 1}},
    {"type": "state"},
]


def test_openenvs_clients_get_the_same_answers_from_our_server(servers):
    theirs, ours = servers
    expected, got = (asyncio.run(_conversation(url, CONVERSATION)) for url in (theirs, ours))
    assert [_comparable(answer) for answer in got] == [_comparable(answer) for answer in expected]
    codes = [answer["data"]["code"] for answer in got if answer["type"] == "error"]
    assert codes == ["VALIDATION_ERROR", "VALIDATION_ERROR", "EXECUTION_ERROR", "UNKNOWN_TYPE", "INVALID_JSON"]
    raised = next(answer for answer in got if answer["type"] == "error" and answer["data"]["code"] == "EXECUTION_ERROR")
    assert "negative delta not allowed" in raised["data"]["message"]
    assert got[8]["data"] == {"episode_id": "ep-1", "step_count": 3, "total": 10, "refused": 1}
    assert got[7]["data"]["done"] is True and got[7]["data"]["observation"]["total"] == 10


def test_the_verifiers_front_end_ends_each_run_with_the_reward_openenvs_own_server_gives(servers, ours):
    """Verifiers' EnvClient (as prime-rl drives it) runs episodes through our front end, a scripted model replying
    with actions written as JSON (the env takes objects, not text); the same actions on OpenEnv's own server: the same
    return, the sum of its steps' rewards."""
    plays = {"ten": ['{"delta": 4}', '```json\n{"delta": 6}\n```'], "over": ['{"delta": 3}', '{"delta": 0}',
                                                                            ' {"delta": 9}']}
    with ScriptedServer(plays) as model:
        runs = verifiers_runs(ours.status["verifiers"], model.url, [f"script:{name}" for name in plays],
                              [{"seed": 1}, {"seed": 2}])

    async def openenvs_return(replies: list[str], seed: int) -> float:
        actions = [json.loads(reply.strip().removeprefix("```json").removesuffix("```")) for reply in replies]
        answers = await _conversation(servers[0], [{"type": "reset", "data": {"seed": seed}},
                                                   *({"type": "step", "data": action} for action in actions)])
        assert answers[-1]["data"]["done"] and not any(answer["type"] == "error" for answer in answers)
        return sum(answer["data"]["reward"] for answer in answers[1:])
    theirs = [asyncio.run(openenvs_return(replies, seed)) for replies, seed in zip(plays.values(), (1, 2), strict=True)]
    assert rewards_of(runs) == theirs == [10.0, 12.0]


def test_an_action_object_written_as_json_text_plays_on_either_server(servers):
    """The env takes objects, and no text: a model's text that is a JSON object is one, through openenv/remote to
    OpenEnv's server as through ours; other text is an invalid action saying how to write one."""
    for url in servers:
        env = gym.make("openenv/remote", base_url=url)
        env.reset(seed=1)
        obs, reward, terminated, _, info = env.step('```json\n{"delta": 4}\n```')
        assert (json.loads(obs)["total"], reward, terminated) == (4, 4.0, False), url
        obs, reward, _, _, info = env.step("add four")
        assert info["error"]["code"] == "invalid_action" and "a JSON object is taken as one" in obs, url
        obs, reward, terminated, _, info = env.step('{"delta": 6}')
        assert (reward, terminated) == (6.0, True), url
        env.close()


def test_schema_is_the_environments_own(servers):
    theirs, ours = servers
    expected, got = (httpx.get(url + "/schema", timeout=10).json() for url in (theirs, ours))
    assert got == expected
    assert got["observation"]["title"] == "TallyObservation" and got["state"]["title"] == "TallyState"


def test_openenvs_generic_client_plays_the_same_game_on_both(servers, imported):
    """OpenEnv's GenericEnvClient (in the env's venv) against both servers: the same results, errors included."""
    import subprocess

    python = ensure_venv(load_manifest(imported))
    script = '''
import asyncio, json, sys
from openenv.core.generic_client import GenericEnvClient

async def main(url):
    out = []
    async with GenericEnvClient(base_url=url) as env:
        result = await env.reset(seed=0, episode_id="g-1")
        out.append([result.observation, result.reward, result.done])
        for delta in (4, -2, "x", 6):
            try:
                result = await env.step({"delta": delta})
                out.append([result.observation, result.reward, result.done])
            except RuntimeError as exc:
                out.append(["error", "VALIDATION_ERROR" in str(exc), "EXECUTION_ERROR" in str(exc)])
        out.append(await env.state())
    print(json.dumps(out))

asyncio.run(main(sys.argv[1]))
'''
    results = []
    for url in servers:
        done = subprocess.run([str(python), "-c", script, url], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
    assert results[1] == results[0]
    assert results[0][2] == ["error", False, True] and results[0][3] == ["error", True, False]
    assert results[0][-1]["step_count"] == 2 and results[0][-1]["total"] == 10


@pytest.fixture(scope="module")
def quiz_servers(tmp_path_factory):
    """(OpenEnv's server, ours): http URLs of the quiz environment, whose reset takes keyword arguments only."""
    [imported] = import_environment(QUIZ_ENV, "oe-quiz", tmp_path_factory.mktemp("quiz"))
    python = ensure_venv(load_manifest(imported.folder))
    ours = LocalServer(str(imported.folder), 1, 100)
    try:
        with openenv_server(QUIZ_ENV, python, max_sessions=8) as (theirs, _):
            yield theirs, http_url(ours.url)
    finally:
        ours.stop()


QUIZ_CONVERSATION = [
    {"type": "reset", "data": {"dataset_name": "products", "seed": 7, "size": 5}},  # the seed builds the dataset
    {"type": "reset", "data": {}},  # its next question
    {"type": "step", "data": {"answer": "0"}},
    {"type": "reset", "data": {"dataset_name": "sums", "size": 5}},  # the env raises: no seed
    {"type": "reset", "data": {"dataset_name": "sums", "seed": 7, "size": 5, "episode_id": "q-1"}},
    {"type": "state"},
]


def test_reset_keywords_reach_the_environment_and_one_it_does_not_take_is_refused(quiz_servers):
    theirs, ours = quiz_servers
    expected, got = (asyncio.run(_conversation(url, QUIZ_CONVERSATION)) for url in (theirs, ours))
    assert [_comparable(answer) for answer in got] == [_comparable(answer) for answer in expected]
    assert got[0]["data"]["observation"]["question"] != got[4]["data"]["observation"]["question"]
    assert got[3]["data"]["code"] == "EXECUTION_ERROR" and "seed and size must be provided" in got[3]["data"]["message"]

    misspelt = [{"type": "reset", "data": {"dataset": "sums", "seed": 7, "size": 5}}]
    [dropped], [refused] = (asyncio.run(_conversation(url, misspelt)) for url in (theirs, ours))
    assert dropped["type"] == "observation"  # OpenEnv's server played the default dataset, and said nothing
    assert refused["data"]["code"] == "VALIDATION_ERROR" and refused["data"]["message"].endswith(
        "'dataset'; it understands: dataset_name, env_seconds, episode_id, group, max_steps, size")

    async def native():  # our own client: the seed is reset's argument, never an option
        async with openenv_gym.connect(ours.replace("http://", "ws://")) as conn:
            session = conn.session()
            obs, _ = await session.reset(seed=7, options={"dataset_name": "products", "size": 5})
            with pytest.raises(openenv_gym.BadRequestError, match=r"not an option: call reset\(seed=7"):
                await session.reset(options={"seed": 7, "dataset_name": "products", "size": 5})
            await session.close()
            return obs
    assert expected[0]["data"]["observation"]["question"] in asyncio.run(native())

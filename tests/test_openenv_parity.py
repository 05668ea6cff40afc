"""OpenEnv's clients get OpenEnv's own answers from our server: the same OpenEnv project (tests/openenv_envs/
tally_env, in `openenv init`'s layout) served by OpenEnv 0.10.0's own server and, imported, by ours; the same
messages sent to both over a raw /ws socket, and every answer compared, errors included."""

import asyncio
import json
from pathlib import Path

import httpx
import orjson
import pytest
import websockets
from conftest import ROOT, http_url

from benchmarks.openenv_server import openenv_server
from openenv_gym.client.local import LocalServer
from openenv_gym.importers import import_environment
from openenv_gym.manifests import load_manifest
from openenv_gym.manifests.venvs import ensure_venv

TALLY_ENV = ROOT / "tests" / "openenv_envs" / "tally_env"
pytestmark = pytest.mark.env_venvs(TALLY_ENV)


@pytest.fixture(scope="module")
def imported(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("servers")
    import_environment(TALLY_ENV, "oe-tally", out)
    return out / "oe-tally"


@pytest.fixture(scope="module")
def servers(imported):
    """(OpenEnv's server, ours): http URLs of the same environment."""
    python = ensure_venv(load_manifest(imported))
    ours = LocalServer(str(imported), 1, 100)
    try:
        with openenv_server(TALLY_ENV, python, max_sessions=8) as (theirs, _):
            yield theirs, http_url(ours.url)
    finally:
        ours.stop()


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

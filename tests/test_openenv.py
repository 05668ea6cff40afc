"""OpenEnv both ways, with real parts: the `openenv` package in the environments' venv, OpenEnv's own server
(uvicorn) and clients, and an OpenEnv environment written for these tests (tests/openenv_envs/guess_env: MCP
tools, a state with extras), imported and served by us."""

import asyncio
import json
import subprocess
from pathlib import Path

import gymnasium as gym
import httpx
import pytest
from conftest import ROOT, http_url, write_files
from tool_shape import names_of

import openenv_gym
from benchmarks.openenv_server import openenv_server
from openenv_gym.client.local import LocalServer
from openenv_gym.importers import ImportFailedError, import_environment
from openenv_gym.manifests import load_manifest
from openenv_gym.manifests.venvs import ensure_venv
from openenv_gym.registry import register_all

GUESS_ENV = ROOT / "tests" / "openenv_envs" / "guess_env"
ECHO_ENV = ROOT / "benchmarks" / "envs" / "openenv_echo"
pytestmark = pytest.mark.env_venvs(GUESS_ENV, ECHO_ENV)


@pytest.fixture(scope="module")
def imported(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("servers")
    import_environment(GUESS_ENV, "oe-guess", out)
    import_environment(ECHO_ENV, "oe-echo", out, inline_sync=True)
    register_all()
    return out


@pytest.fixture(scope="module")
def openenv_python(imported) -> Path:
    """The python of the venv the imported OpenEnv envs run in: it holds the openenv package."""
    return ensure_venv(load_manifest(imported / "oe-guess"))


@pytest.fixture(scope="module")
def their_guess(openenv_python):
    with openenv_server(GUESS_ENV, openenv_python, max_sessions=16) as (url, _):
        yield url


@pytest.fixture(scope="module")
def our_guess(imported):
    server = LocalServer(str(imported / "oe-guess"), 1, 1000)
    yield server.url
    server.stop()


def play(env, seed: int, moves: list) -> list[tuple]:
    """A trajectory: the reset's text, then (text, reward, terminated, truncated) per move."""
    obs, info = env.reset(seed=seed)
    steps: list[tuple] = [(obs,)]
    for move in moves:
        obs, reward, terminated, truncated, info = env.step(move)
        steps.append((obs, reward, terminated, truncated))
        if terminated or truncated:
            break
    return steps


def bisect(env, seed: int) -> tuple[list[tuple], dict]:
    """A game of guess played to the end by bisection; (trajectory, state at the end)."""
    obs, info = env.reset(seed=seed)
    low, high, steps = 1, 100, [(obs,)]
    while True:
        guess = (low + high) // 2
        obs, reward, terminated, truncated, info = env.step({"name": "guess", "arguments": {"number": guess}})
        steps.append((obs, reward, terminated, truncated))
        if terminated or truncated:
            return steps, env.unwrapped.state()
        low, high = (guess + 1, high) if "higher" in obs else (low, guess - 1)


MOVES = ["hint()", {"name": "guess", "arguments": {"number": 50}}, {"name": "nope", "arguments": {}},
         {"name": "guess", "arguments": {"number": "many"}}, "no tool call here",
         '<tool_call>{"name": "guess", "arguments": {"number": 25}}</tool_call>',
         {"type": "call_tool", "tool_name": "guess", "arguments": {"number": 12}}]  # OpenEnv's CallToolAction


def test_openenv_remote_drives_openenvs_own_server(their_guess):
    env = gym.make("openenv/remote", base_url=their_guess)
    description = env.unwrapped.description
    assert description["source"] == "openenv-ws" and description["action"] == "tools"
    assert names_of(description["tools"]) == ["guess", "hint"]
    steps, state = bisect(env, seed=11)
    assert steps[0][0].startswith("Find the number between 1 and 100")
    assert steps[-1][1:] == (1.0, True, False) and steps[-1][0].endswith("is correct")
    assert all(step[1:] == (0.0, False, False) for step in steps[1:-1])
    assert state["steps"] == len(steps) - 1 and not state["running"]
    assert state["extras"]["guesses"] == len(steps) - 1  # the env's own State fields
    with pytest.raises(openenv_gym.NoEpisodeError):  # no auto-reset, as everywhere
        env.step({"name": "hint", "arguments": {}})
    obs, info = env.reset(seed=1, options={"episode_id": "mine", "max_steps": 2})
    assert env.unwrapped.state()["episode_id"] == "mine"
    env.step("hint()")
    assert env.step("hint()")[3]  # our step limit truncates: OpenEnv has none
    env.close()


def test_make_vec_over_openenv_sockets(their_guess):
    envs = gym.make_vec("openenv/remote", num_envs=8, base_url=their_guess)
    obs, infos = envs.reset(seed=0)
    assert all(o.startswith("Find the number") for o in obs)
    obs, rewards, terminated, truncated, infos = envs.step([{"name": "guess", "arguments": {"number": 50}}] * 8)
    assert all("than 50" in o or o == "50 is correct" for o in obs)
    assert list(terminated) == [o == "50 is correct" for o in obs]
    envs.close()


def test_imported_openenv_env_plays_as_openenv_serves_it(their_guess, our_guess, imported):
    theirs = gym.make("openenv/remote", base_url=their_guess)
    ours = gym.make("openenv/oe-guess", base_url=our_guess)
    assert ours.unwrapped.description["tools"] == theirs.unwrapped.description["tools"]
    assert names_of(ours.reset(seed=0)[1]["tools"]) == ["guess", "hint"]
    for seed in (0, 5, 42):
        assert play(ours, seed, MOVES) == play(theirs, seed, MOVES)
        mine, my_state = bisect(ours, seed)
        their, their_state = bisect(theirs, seed)
        assert mine == their
        assert my_state["extras"] == their_state["extras"]
    theirs.close()
    ours.close()


def test_imported_object_action_env(imported):
    """A typed Action model: objects are validated by it, text fills its one text field."""
    env = gym.make("openenv/oe-echo")
    assert env.unwrapped.description["action"] == "text"
    assert env.unwrapped.description["action_schema"]["required"] == ["message"]
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step("hello")
    assert info["observation"]["echoed_message"] == "hello" and reward == 0.5 and info["metadata"] == {"step": 1}
    assert env.step({"message": "hi"})[0] == '{"echoed_message":"hi","message_length":2}'  # no text field: JSON
    obs, reward, terminated, truncated, info = env.step({"message": 7})
    assert info["error"]["code"] == "invalid_action" and "EchoAction" in obs and "string" in obs
    assert env.unwrapped.state()["steps"] == 3  # the session goes on
    env.close()
    server = LocalServer(str(imported / "oe-echo"), 1, 10)
    try:  # what OpenEnv's clients read at /schema is the env's own Action model
        schema = httpx.get(http_url(server.url) + "/schema", timeout=5).json()
        assert schema["action"]["title"] == "EchoAction" and schema["action"]["required"] == ["message"]
    finally:
        server.stop()


def test_remote_object_actions_are_checked_against_the_schema(openenv_python):
    with openenv_server(ECHO_ENV, openenv_python, max_sessions=4) as (url, _):
        env = gym.make("openenv/remote", base_url=url)
        env.reset(seed=0)
        assert env.step("hello")[1:4] == (0.5, False, False)
        obs, reward, terminated, truncated, info = env.step({"message": "hi", "loud": True})
        assert info["error"]["code"] == "invalid_action" and "loud" in obs  # refused here, never sent
        obs, reward, terminated, truncated, info = env.step({"message": "ok"})
        assert info["observation"]["echoed_message"] == "ok" and reward == pytest.approx(0.2)
        env.close()


def _openenv_clients(python: Path, url: str) -> dict:
    done = subprocess.run([str(python), str(ROOT / "tests" / "openenv_clients.py"), url],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_openenvs_own_clients_play_against_our_server(openenv_python, guess_url, our_guess, their_guess):
    theirs = _openenv_clients(openenv_python, their_guess)
    assert _openenv_clients(openenv_python, http_url(our_guess)) == theirs  # the imported env: OpenEnv's answers
    for result in (theirs, _openenv_clients(openenv_python, http_url(guess_url))):  # and the shipped env plays too
        generic, mcp = result["generic"], result["mcp"]
        assert generic["reset"].startswith(("I am thinking", "Find the number"))
        assert generic["turns"][-1][1] > 0 and generic["turns"][-1][2] is True
        assert "correct" in generic["turns"][-1][0]
        assert generic["state"]["episode_id"] == "ep-7" and generic["state"]["step_count"] == len(generic["turns"])
        assert generic["bad_action"] == "VALIDATION_ERROR"
        assert "50" in generic["after_bad"]
        assert {"guess"} <= set(mcp["tools"])
        assert "correct" in mcp["answers"][-1]


def test_sessions_of_an_env_without_concurrent_sessions(tmp_path, openenv_python):
    """SUPPORTS_CONCURRENT_SESSIONS unset: one session per worker process, and the refusal says why."""
    project = tmp_path / "single"
    for path in GUESS_ENV.rglob("*"):
        if path.is_file() and "__pycache__" not in path.parts:
            target = project / path.relative_to(GUESS_ENV)
            target.parent.mkdir(parents=True, exist_ok=True)
            text = path.read_text().replace("SUPPORTS_CONCURRENT_SESSIONS = True\n", "")
            # as such a project must, or OpenEnv's create_app refuses it too
            target.write_text(text.replace('"MAX_CONCURRENT_ENVS", "64"', '"MAX_CONCURRENT_ENVS", "1"'))
    [result] = import_environment(project, "oe-single", tmp_path / "out")
    assert any("SUPPORTS_CONCURRENT_SESSIONS" in note for note in result.notes)
    server = LocalServer(str(result.folder), 1, 100)
    try:
        async def main():
            async with openenv_gym.connect(server.url) as conn:
                first, second = conn.session(), conn.session()
                await first.reset(seed=0)
                with pytest.raises(openenv_gym.CapacityError, match="SUPPORTS_CONCURRENT_SESSIONS"):
                    await second.reset(seed=0)
                await first.close()
                await second.reset(seed=0)  # the one slot is free again
                await second.close()
        asyncio.run(main())
    finally:
        server.stop()


def test_probe_knows_our_server_and_refuses_what_it_does_not_know(echo_url):
    env = gym.make("openenv/remote", base_url=http_url(echo_url))  # our own server: the native transport
    assert env.unwrapped.description["name"] == "echo"
    env.reset(seed=0)
    assert env.step("hi")[0] == "hi"
    env.close()
    with pytest.raises(openenv_gym.ServerUnreachableError, match="speaks none of"):
        gym.make("openenv/remote", base_url=http_url(echo_url) + "/nothing-here")
    with pytest.raises(ValueError, match="base_url="):
        gym.make("openenv/remote")


@pytest.mark.bench  # two imports with their load checks (12 to 20 s): make bench runs it
def test_import_finds_the_action_model_or_says_what_to_add(tmp_path):
    project = write_files(tmp_path / "bare", {
        "env.py": """
            from openenv.core.env_server.interfaces import Environment as Base

            class Bare(Base):
                def reset(self, seed=None, episode_id=None, **kwargs): ...
                def step(self, action): ...
                @property
                def state(self): ...
            """})
    with pytest.raises(ImportFailedError, match="cannot tell the Action model"):
        import_environment(project, "bare", tmp_path / "out")
    write_files(project, {"env.py": (project / "env.py").read_text().replace(
        "def step(self, action)", "def step(self, action: BareAction)").replace(
        "from openenv", "from models import BareAction\nfrom openenv"),
        "models.py": "from openenv.core.env_server.types import Action\n\nclass BareAction(Action):\n    move: str\n"})
    [result] = import_environment(project, "bare", tmp_path / "out")
    assert load_manifest(result.folder).action == "models:BareAction"
    assert load_manifest(result.folder).entry == "env:Bare" and result.gym_id == "openenv/bare"
    with pytest.raises(ImportFailedError, match="--inline-sync is for OpenEnv"):
        import_environment(ROOT / "tests" / "ors_envs" / "answer", "x", tmp_path / "out2", inline_sync=True)


def test_openenv_http_routes_answer_on_our_imported_server(our_guess, their_guess):
    schema = httpx.get(http_url(our_guess) + "/schema", timeout=5).json()
    assert schema == httpx.get(their_guess + "/schema", timeout=5).json()  # the env's own models, as OpenEnv shows
    assert schema["action"]["title"] == "CallToolAction"
    assert httpx.get(http_url(our_guess) + "/health", timeout=5).json() == {"status": "healthy"}


def test_an_openenv_server_that_answers_garbage_loses_only_that_session():
    """A server whose /ws answers are not JSON: a typed error, the session dropped, the env usable after."""
    import threading

    from websockets.sync.server import serve

    answers = iter(["this is not JSON", json.dumps({"type": "observation", "data": {
        "observation": {"text": "fine"}, "reward": None, "done": False}})])

    def route(connection, request):
        if request.path == "/schema":
            return connection.respond(200, json.dumps({"action": {"type": "object", "properties": {
                "message": {"type": "string"}}, "required": ["message"]}}))
        if request.path == "/metadata":
            return connection.respond(200, json.dumps({"name": "garbage"}))
        return None

    def handler(socket):
        for _ in socket:
            socket.send(next(answers))

    with serve(handler, "127.0.0.1", 0, process_request=route) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{server.socket.getsockname()[1]}"
        env = gym.make("openenv/remote", base_url=url)
        with pytest.raises(openenv_gym.EnvError, match="not a JSON object"):
            env.reset(seed=0)
        assert env.reset(seed=0)[0] == "fine"  # a new socket, a new session
        env.close()
        server.shutdown()

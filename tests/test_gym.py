"""The Gymnasium facade: gym.make embedded and with base_url, check_env, random actions."""

import asyncio
import warnings

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env
from tool_shape import names_of

import openenv_gym
from openenv_gym.manifests.discovery import shipped_manifests
from openenv_gym.spaces import ToolCallSpace, UnicodeText

# (the CLI agents' episodes start a Node program each, a second and their venv's npm packages: they are played in
# tests/test_cli_agents.py, not in the sweeps of every shipped environment here; nor is openenv/verifiers-remote, which
# plays a Verifiers env server someone runs, named in its make_args: tests/test_verifiers_serve.py)
SHIPPED_IDS = [m.gym_id for m in shipped_manifests() if not m.npm and not getattr(m, "make_args", ())]


def test_import_registers_every_shipped_env():
    assert {"openenv/echo", "openenv/guess"} <= set(SHIPPED_IDS)
    for env_id in SHIPPED_IDS:
        assert gym.spec(env_id).entry_point == "openenv_gym.env:RemoteEnv"


@pytest.mark.parametrize("env_id", SHIPPED_IDS)
def test_check_env_passes_for_every_shipped_env(env_id):
    env = gym.make(env_id)
    with warnings.catch_warnings(record=True) as caught:  # check_env reports problems as warnings
        warnings.simplefilter("always")
        check_env(env.unwrapped)
    env.close()
    assert [str(w.message) for w in caught] == []


@pytest.mark.parametrize("env_id", SHIPPED_IDS)
def test_random_actions_never_crash(env_id):
    env = gym.make(env_id)
    env.action_space.seed(0)
    obs, info = env.reset(seed=0)
    episodes = steps = 0
    while steps < 300 and episodes < 20:  # (an agent env's episode is a program run)
        obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        assert obs in env.observation_space and isinstance(reward, float)
        steps += 1
        if terminated or truncated:
            episodes += 1
            env.reset()
    assert episodes > 0
    env.close()


def test_embedded_guess_plays_a_game():
    env = gym.make("openenv/guess")
    assert isinstance(env.action_space, ToolCallSpace)
    assert env.action_space.tool_names == ["divisible_by", "give_up", "guess"]
    obs, info = env.reset(seed=5, options={"low": 1, "high": 8})
    assert names_of(info["tools"]) == ["divisible_by", "give_up", "guess"]  # shown at every reset
    low, high, total, guesses = info["low"], info["high"], 0.0, 0
    while True:
        middle = (low + high) // 2
        obs, reward, terminated, truncated, info = env.step({"name": "guess", "arguments": {"number": middle}})
        total += reward
        guesses += 1
        if terminated:
            break
        low, high = (middle + 1, high) if "higher" in obs else (low, middle - 1)
    assert "correct" in obs and guesses <= 4
    assert reward == pytest.approx(1.0 - 0.05 * (guesses - 1))
    # the options it declares it reads are taken; one it does not is refused with those it does, never ignored
    with pytest.raises(openenv_gym.BadRequestError, match="guess does not understand the reset option 'hi'; it "
                                                          "understands: env_seconds, episode_id, group, high, low, "
                                                          "max_steps"):
        env.reset(options={"low": 1, "hi": 8})
    assert env.reset(options={"low": 1, "high": 2, "max_steps": 3})[1]["high"] == 2  # the env plays on
    env.close()


def test_raw_text_actions_and_invalid_actions():
    env = gym.make("openenv/guess")
    env.reset(seed=1)
    obs, *_ = env.step('<tool_call>{"name": "divisible_by", "arguments": {"divisor": 2}}</tool_call>')
    assert "divisible by 2" in obs
    obs, reward, terminated, truncated, info = env.step("I have no idea")
    assert obs.startswith("Invalid action") and info["error"]["code"] == "invalid_action" and reward == -0.05
    obs, reward, terminated, truncated, info = env.step(12.5)  # not even text: still an observation
    assert info["error"]["code"] == "invalid_action" and not terminated
    obs, *_ = env.step("guess(number=1000)")
    assert "lower" in obs
    env.close()


def test_truncation_at_step_limit():
    env = gym.make("openenv/echo")
    env.reset(options={"max_steps": 2})
    assert env.step("a")[3] is False
    obs, reward, terminated, truncated, info = env.step("abc")
    assert (obs, reward, terminated, truncated) == ("abc", pytest.approx(0.3), False, True)
    env.close()


def test_make_with_base_url_uses_that_server(echo_url):
    env = gym.make("openenv/echo", base_url=echo_url, render_mode="ansi")
    assert env.unwrapped.base_url == echo_url
    assert isinstance(env.observation_space, UnicodeText)
    env.reset()
    env.step("héllo wörld 🙂")
    assert env.render() == "héllo wörld 🙂"
    env.close()
    env.close()  # idempotent


def test_default_options_from_make(echo_url):
    env = gym.make("openenv/echo", base_url=echo_url, options={"max_steps": 1})
    env.reset()
    assert env.step("x")[3] is True
    env.close()


def test_seeding_reproduces_episodes():
    a, b = gym.make("openenv/guess"), gym.make("openenv/guess")
    a.reset(seed=42)
    b.reset(seed=42)
    call = {"name": "guess", "arguments": {"number": 50}}
    assert [a.reset()[0] for _ in range(3)] == [b.reset()[0] for _ in range(3)]
    assert a.step(call) == b.step(call)
    a.close()
    b.close()


def test_works_inside_a_running_event_loop(echo_url):
    """Jupyter and async trainers call gym envs from inside a loop: they go to the background runner."""

    async def main():
        env = gym.make("openenv/echo", base_url=echo_url)
        env.reset()
        result = env.step("from a loop")
        env.close()
        return result

    assert asyncio.run(main())[0] == "from a loop"


def test_remote_env_without_env_or_url_is_a_clear_error():
    with pytest.raises(ValueError, match=r"env= .* or base_url="):
        openenv_gym.RemoteEnv()


def test_tool_spaces_in_http_catalog_match_the_gym_spaces():
    import httpx

    env = gym.make("openenv/guess")
    url = "http://" + env.unwrapped.base_url.removeprefix("ws://") + "/info"
    assert httpx.get(url).json()["spaces"]["action"]["tools"] == env.action_space.tool_names
    env.close()


def test_embedded_server_is_shared_within_a_process():
    a, b = gym.make("openenv/echo"), gym.make("openenv/echo")
    assert a.unwrapped.base_url == b.unwrapped.base_url
    a.close()
    b.close()


@pytest.mark.parametrize("ending", ["exit", "kill"])
def test_embedded_server_stops_with_its_process(ending):
    """At exit the local server is stopped; if the process is killed, the server notices and stops too."""
    import subprocess
    import sys

    from conftest import wait_until

    code = ("import gymnasium as gym, openenv_gym, sys, time\n"
            "env = gym.make('openenv/echo'); env.reset()\n"
            "print(env.unwrapped.base_url, flush=True)\n"
            + ("time.sleep(60)\n" if ending == "kill" else ""))
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    url = child.stdout.readline().strip()
    if ending == "kill":
        child.kill()
    child.wait(timeout=30)

    async def reachable():
        try:
            await (await openenv_gym.connect(url, open_timeout=1)).close()
        except openenv_gym.ServerUnreachableError:
            return False
        return True

    def server_gone():
        return not asyncio.run(reachable())

    assert url.startswith("ws://") and wait_until(server_gone, timeout=10)


def test_a_running_server_that_serves_another_env_is_refused(echo_url):
    with pytest.raises(openenv_gym.EnvNotFoundError, match="serves 'echo', not 'guess'"):
        gym.make("openenv/guess", base_url=echo_url)
    with pytest.raises(openenv_gym.EnvNotFoundError, match="serves 'echo', not 'guess'"):
        gym.make_vec("openenv/guess", num_envs=2, base_url=echo_url)
    env = gym.make("openenv/echo", base_url=echo_url)  # the env it serves is fine
    env.close()


def test_state_tells_episode_id_steps_and_the_envs_extras(guess_url):
    env = gym.make("openenv/guess", base_url=guess_url)
    env.reset(seed=3, options={"episode_id": "game-1"})
    env.step({"name": "guess", "arguments": {"number": 50}})
    state = env.unwrapped.state()
    assert state["episode_id"] == "game-1" and state["steps"] == 1 and state["running"]
    assert state["extras"]["guesses"] == 1
    assert state["extras"]["known_high"] - state["extras"]["known_low"] < 99  # the guess narrowed the range
    assert "secret" not in state["extras"]
    env.reset(seed=4)
    fresh = env.unwrapped.state()
    assert fresh["episode_id"] not in (None, "game-1") and fresh["steps"] == 0
    assert fresh["extras"] == {"known_low": 1, "known_high": 100, "guesses": 0}
    with pytest.raises(openenv_gym.BadRequestError, match="episode_id"):
        env.reset(options={"episode_id": 7})
    env.close()

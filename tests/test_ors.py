"""ORS environments imported and served: real `openreward` / `ors-sdk` in the environments' own venvs."""

from pathlib import Path

import gymnasium as gym
import pytest

import openenv_gym
from openenv_gym.importers import import_environment
from openenv_gym.registry import register_all

ORS_ENVS = Path(__file__).parent / "ors_envs"


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    """Import the test ORS environments once and register their gym ids."""
    out = tmp_path_factory.mktemp("servers")
    for name in ("answer",):
        import_environment(ORS_ENVS / name, name, out)
    register_all()
    return out


def test_answer_env_through_gym_make(imported):
    env = gym.make("openenv/ors-answer")
    assert env.action_space.tool_names == ["answer"]
    obs, info = env.reset(seed=0)
    assert obs in {"What is 2 + 3?", "What is 7 * 6?", "Capital of France?"}
    assert info["split"] == "train" and "task_spec" not in info and "answer" not in str(info)
    assert env.reset(seed=0) == (obs, info)  # the seeded choice is reproducible

    obs, info = env.reset(options={"split": "train", "index": 1})
    assert obs == "What is 7 * 6?" and info == {"split": "train", "index": 1}
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


def test_bad_task_options_are_typed_errors(imported):
    env = gym.make("openenv/ors-answer")
    env.reset(seed=1)  # (Gymnasium's passive checker trips over a failing *first* reset, so start with a good one)
    with pytest.raises(openenv_gym.BadRequestError, match="unknown split 'dev'; splits: train, test"):
        env.reset(options={"split": "dev"})
    with pytest.raises(openenv_gym.BadRequestError, match="out of range"):
        env.reset(options={"split": "test", "index": 5})
    env.reset(options={"split": "test", "index": 0})  # the env still works
    obs, reward, terminated, truncated, info = env.step({"name": "nope", "arguments": {}})
    assert info["error"]["code"] == "invalid_action" and not terminated
    env.close()

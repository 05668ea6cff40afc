"""Each script in examples/ runs as a user runs it, one per workflow, and does what its docstring says."""

import re
import subprocess
import sys

import pytest
from conftest import ROOT
from openai_server import ScriptedServer

EXAMPLES = ROOT / "examples"


def run(script: str, *args: str, timeout: float = 600) -> str:
    done = subprocess.run([sys.executable, str(EXAMPLES / script), *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.mark.bench  # (15 s; README.md's block imports and plays the same package in make test): make bench runs it
def test_import_a_published_environment_and_play_it(tmp_path):
    """marble-v1, a Verifiers v1 taskset from the package index, imported and played: the level's own layout
    scores, an empty one does not."""
    out = run("import_and_play.py", "--episodes", "2", "--output-dir", str(tmp_path))
    assert re.findall(r"the level's own layout: reward (\S+)", out) == ["1.0", "1.0"]
    assert re.findall(r"no pieces at all: reward (\S+)", out) == ["0.0", "0.0"]


def test_train_with_trl_and_a_tiny_model():
    out = run("train_trl.py", "--steps", "2")
    assert re.findall(r"^step (\d+): mean reward -?\d", out, re.MULTILINE) == ["1", "2"]


def test_rollouts_against_an_openai_compatible_server():
    with ScriptedServer() as server:  # a real HTTP server answering as a model would (bisection)
        out = run("rollouts_openai.py", "--model-url", server.url, "--model", "scripted", "--groups", "3",
                  "--group-size", "2")
    groups = re.findall(r"^group (\S+): returns \[(.*?)\], mean (\S+), advantages", out, re.MULTILINE)
    assert len(groups) == 3 and all(float(mean) > 0.5 for _, _, mean in groups)
    assert len(server.bodies) >= 6  # every episode asked the model


def test_a_harbor_task_played_with_bash():
    out = run("harbor_bash.py")
    assert "the sum (42): reward 1.0, terminated True" in out
    assert "a wrong answer (43): reward 0.0, terminated True" in out


def test_prime_rls_orchestrator_calls_play_groups_on_our_server():
    """Run with a python that has verifiers 0.4 (the front end's venv): the config lines printed for the server it
    started, and one group per task, each run an episode of guess (the scripted model finds the number)."""
    from openenv_gym.manifests.venvs import ensure_venv
    from openenv_gym.server.verifiers_front import front_end_manifest

    with ScriptedServer() as server:
        done = subprocess.run([str(ensure_venv(front_end_manifest())), str(EXAMPLES / "prime_rl_orchestrator.py"),
                               "--model-url", server.url, "--model", "scripted", "--seeds", "1", "2",
                               "--group-size", "3"], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    assert re.search(r'id = "openenv_gym_verifiers"\nurl = "ws://127\.0\.0\.1:\d+"\ntasks = \[\{seed = 1\}, '
                     r'\{seed = 2\}\]\n\[orchestrator\.train\.source\.serve\]\naddress = "tcp://127\.0\.0\.1:\d+"',
                     done.stdout)
    groups = re.findall(r"^task seed=(\d): rewards \[(.*?)\], mean (\S+), model calls \[(.*?)\], ok (\w+)",
                        done.stdout, re.MULTILINE)
    assert [(seed, ok) for seed, _, _, _, ok in groups] == [("1", "True"), ("2", "True")]
    assert all(float(mean) > 0.5 and len(rewards.split(", ")) == 3 for _, rewards, mean, _, _ in groups)

"""`openenv-gym validate`: run as a user runs it (the command, in a subprocess), on our Harbor fixtures and on
environments made to fail one check each; its JSON report, its verdict and its exit code."""

import json
import shutil
import subprocess
import sys

import pytest
from conftest import ROOT, write_files

from openenv_gym.sandbox import unavailable

TASKS = ROOT / "tests" / "harbor_tasks"
pytestmark = pytest.mark.env_venvs.with_args(TASKS)
needs_sandbox = pytest.mark.skipif(unavailable() is not None, reason="needs the sandbox (make test sets it up)")


def validate(target, *extra) -> tuple[int, dict]:
    done = subprocess.run([sys.executable, "-m", "openenv_gym", "validate", str(target), "--json", *extra],
                          capture_output=True, text=True, timeout=600)
    return done.returncode, json.loads(done.stdout)


def statuses(report: dict) -> dict[str, str]:
    return {result["check_id"]: result["status"] for result in report["results"]}


@needs_sandbox
def test_our_harbor_tasks_pass_every_check(tmp_path):
    code, report = validate(TASKS)
    assert (code, report["verdict"], report["kind"]) == (0, "pass", "harbor")
    assert statuses(report) == {check: "pass" for check in (
        "static.manifest", "static.loads", "runtime.reset_step", "runtime.seed_repeats", "runtime.seeds_differ",
        "semantic.oracle_max", "semantic.floor_gap", "network.egress_denied")}
    result = next(r for r in report["results"] if r["check_id"] == "network.egress_denied")
    assert result["measured"] == {"tasks": 3} and set(result) == {"check_id", "status", "measured", "evidence",
                                                                    "remediation"}


@needs_sandbox
@pytest.mark.bench  # two more Harbor tasks validated end to end (12 s): make bench runs it
def test_an_oracle_that_misses_and_tests_that_pass_untouched_fail_their_checks(tmp_path):
    wrong = tmp_path / "wrong"
    shutil.copytree(TASKS / "hello_v14", wrong)
    (wrong / "solution" / "solve.sh").write_text("#!/bin/bash\necho nope > greeting.txt\n")
    code, report = validate(wrong)
    assert code == 1 and statuses(report)["semantic.oracle_max"] == "fail"
    lax = write_files(tmp_path / "lax", {
        "task.toml": "", "instruction.md": "Anything.\n", "environment/Dockerfile": "FROM ubuntu:24.04\nWORKDIR /app\n",
        "tests/test.sh": "#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n", "solution/solve.sh": "#!/bin/bash\n"})
    code, report = validate(lax)
    assert code == 1 and statuses(report)["semantic.oracle_max"] == "pass"
    assert statuses(report)["semantic.floor_gap"] == "fail"
    assert "oracle 1, nothing 1" in next(r for r in report["results"]
                                         if r["check_id"] == "semantic.floor_gap")["evidence"][0]


def test_a_seed_that_is_ignored_fails_where_the_environment_claims_determinism(tmp_path):
    folder = write_files(tmp_path / "coin", {
        "openenv.toml": 'name = "coin"\nkind = "python"\nentry = "coin:Coin"\ndeterministic = true\n',
        "coin.py": '''
import random
from openenv_gym import Environment, ResetResult, StepResult

class Coin(Environment):
    async def reset(self, *, seed=None, options=None):
        return ResetResult(str(random.random()))  # the seed ignored

    async def step(self, action):
        return StepResult("done", 0.0, True)
'''})
    code, report = validate(folder)
    assert code == 1 and statuses(report)["runtime.seed_repeats"] == "fail"
    assert statuses(report)["semantic.oracle_max"] == "skip"


def test_what_is_not_an_environment_fails_and_what_cannot_load_is_unsupported(tmp_path):
    code, report = validate(tmp_path / "nothing-here")
    assert code == 1 and statuses(report) == {"static.manifest": "fail"}
    broken = write_files(tmp_path / "broken", {"openenv.toml": 'name = "broken"\nentry = "broken:Env"\n',
                                               "broken.py": "raise RuntimeError('broken at import')\n"})
    code, report = validate(broken)
    assert code == 2 and statuses(report)["static.loads"] == "fail"
    assert "broken at import" in next(r for r in report["results"] if r["check_id"] == "static.loads")["evidence"][0]


def test_an_oracle_of_yours_plays_any_kind_against_doing_nothing(tmp_path):
    folder = write_files(tmp_path / "polite", {
        "openenv.toml": 'name = "polite"\nkind = "python"\nentry = "polite:Polite"\n',
        "polite.py": '''
from openenv_gym import Environment, ResetResult, StepResult

class Polite(Environment):
    async def reset(self, *, seed=None, options=None):
        return ResetResult(f"say please ({seed})")

    async def step(self, action):
        return StepResult("ok", 1.0 if action == "please" else 0.0, True)
'''})
    right = write_files(tmp_path / "right", {"oracle.py": "def act(observation, info):\n    return 'please'\n"})
    code, report = validate(folder, "--oracle", str(right / "oracle.py"))
    assert code == 0 and statuses(report)["semantic.oracle_max"] == statuses(report)["semantic.floor_gap"] == "pass"
    wrong = write_files(tmp_path / "wrong", {"oracle.py": "def act(observation, info):\n    return 'now'\n"})
    code, report = validate(folder, "--oracle", str(wrong / "oracle.py"))
    assert code == 1 and statuses(report)["semantic.oracle_max"] == "fail"

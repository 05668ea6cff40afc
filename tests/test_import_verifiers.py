"""Verifiers sources: detection of the classic API, the version pin, refusals, hazards (nothing is run)."""

import tomllib
from functools import partial

import pytest
from conftest import write_files as write

from openenv_gym.importers import ImportFailedError, detect_all
from openenv_gym.importers import import_environment as import_and_check

# The sources here are written to be read (detection, vendoring, notes), not run: imported without loading them.
# tests/test_import_checks.py imports sources the way users do, loading each as the server will.
import_environment = partial(import_and_check, check=False)


CLASSIC = '''
import verifiers as vf
from datasets import Dataset

raise SystemExit("detection must never run the source")


def load_environment(num_examples: int = 10, **kwargs):
    dataset = Dataset.from_list([{"question": "2+2?", "answer": "4"}])
    return vf.SingleTurnEnv(dataset=dataset, rubric=vf.Rubric(funcs=[]), **kwargs)
'''


def pyproject(*deps: str) -> str:
    return "[project]\nname = \"my-env\"\ndependencies = [" + ", ".join(f'"{d}"' for d in deps) + "]\n"


@pytest.mark.parametrize("imports", ["import verifiers as vf", "import verifiers.legacy as vf",
                                     "from verifiers.envs.multiturn_env import MultiTurnEnv as vf"])
def test_detects_classic_environments(tmp_path, imports):
    source = write(tmp_path / "src", {"my_env.py": CLASSIC.replace("import verifiers as vf", imports)})
    (found,) = detect_all(source)
    assert (found.kind, found.entry) == ("verifiers", "my_env:load_environment")


def test_a_package_with_load_environment_in_two_modules_gets_an_id_for_each(tmp_path):
    """As a published package that ships two envs (sophistry-bench: vf_env.py and sprint/env.py): one id per module,
    not two of the same name."""
    source = write(tmp_path / "src", {"vf_env.py": CLASSIC, "sprint/__init__.py": "", "sprint/env.py": CLASSIC})
    results = import_environment(source, "pair", tmp_path / "out")
    assert sorted((r.gym_id, r.detected.entry) for r in results) == [
        ("openenv/verifiers-pair-sprint_env", "sprint.env:load_environment"),
        ("openenv/verifiers-pair-vf_env", "vf_env:load_environment")]


@pytest.mark.parametrize("declared, installed, note", [
    ((), "verifiers<0.4,>=0.1.11", "does not pin verifiers"),
    (("verifiers>=0.1.8",), "verifiers<0.4,>=0.1.11,>=0.1.8", "capped verifiers>=0.1.8 at <0.4"),
    (("verifiers==0.3.1", "datasets"), "verifiers<0.4,==0.3.1,>=0.1.11", None),
    (("verifiers[openenv]>=0.3.0",), "verifiers[openenv]<0.4,>=0.1.11,>=0.3.0", "capped"),  # extras kept
    (("verifiers>=0.3.1.dev0",), "verifiers<0.4,<=0.3.1,>=0.1.11,>=0.3.1.dev0", "pre-releases of verifiers"),
])
def test_the_verifiers_pin_is_kept_to_the_classic_api(tmp_path, declared, installed, note):
    source = write(tmp_path / "src", {"my_env.py": CLASSIC, "pyproject.toml": pyproject(*declared)})
    (result,) = import_environment(source, "math", tmp_path / "out")
    assert result.gym_id == "openenv/verifiers-math"
    manifest = tomllib.loads((result.folder / "openenv.toml").read_text())
    assert manifest["kind"] == "verifiers" and manifest["entry"] == "my_env:load_environment"
    assert installed in manifest["dependencies"] and ("datasets" in manifest["dependencies"]) == (
        "datasets" in declared)
    assert any(note in n for n in result.notes) if note else not any("pin" in n for n in result.notes)


def test_a_pin_to_a_pre_release_is_refused_saying_which_releases_work(tmp_path):
    source = write(tmp_path / "src", {"my_env.py": CLASSIC, "pyproject.toml": pyproject("verifiers==0.3.2.dev210")})
    with pytest.raises(ImportFailedError, match=r"holds no release of the classic API .* pre-releases"):
        import_environment(source, "dev", tmp_path / "out")


STRING_TASKS = CLASSIC + "\nROWS = [{'question': 'Say hi.', 'answer': 'hi', 'task': 'greet'}]\n"


def test_plain_string_task_rows_are_checked_against_the_pin_at_import(tmp_path):
    (capped,) = import_environment(write(tmp_path / "a", {"my_env.py": STRING_TASKS}), "a", tmp_path / "out")
    manifest = tomllib.loads((capped.folder / "openenv.toml").read_text())
    assert "verifiers<0.1.14,<0.4,>=0.1.11" in manifest["dependencies"]
    assert any("plain-string `task` column" in note for note in capped.notes)
    source = write(tmp_path / "b", {"my_env.py": STRING_TASKS, "pyproject.toml": pyproject("verifiers>=0.2")})
    with pytest.raises(ImportFailedError, match=r"plain-string `task` column.*pin verifiers==0.1.12"):
        import_environment(source, "b", tmp_path / "out")
    json_tasks = CLASSIC + "\nROWS = [{'question': 'Say hi.', 'task': json.dumps({'route': 'greet'})}]\n"
    (fine,) = import_environment(write(tmp_path / "c", {"my_env.py": json_tasks}), "c", tmp_path / "out")
    assert not any("task" in note for note in fine.notes)


V1_TASKSET = """
raise SystemExit("detection must never run the source")


class Data(vf.TaskData):
    answer: str


class Tasks(TASKSET_BASE):
    def load(self):
        return []
"""
V1_STYLES = {  # how v1 packages import the API and name the base class
    "vf-init": ("import verifiers.v1 as vf\n", "vf.Taskset[vf.Task, vf.TasksetConfig]"),
    "from-import": ("from verifiers import v1 as vf\n", "vf.Taskset"),
    "names": ("import verifiers.v1 as vf\nfrom verifiers.v1 import Taskset\n", "Taskset[vf.Task, vf.TasksetConfig]"),
}


def v1_package(folder, style="vf-init", pins=("verifiers>=0.4",), exported="Tasks"):
    imports, base = V1_STYLES[style]
    return write(folder, {"pyproject.toml": pyproject(*pins, "numpy"),
                          "my_env/__init__.py": f"from my_env.taskset import Tasks\n__all__ = [{exported!r}]\n",
                          "my_env/taskset.py": imports + V1_TASKSET.replace("TASKSET_BASE", base)})


@pytest.mark.parametrize("style", V1_STYLES)
def test_detects_v1_packages_by_their_exported_taskset(tmp_path, style):
    source = v1_package(tmp_path / "src", style)
    (found,) = detect_all(source)
    assert (found.kind, found.entry) == ("verifiers", "my_env:Tasks")
    [result] = import_environment(source, "v1", tmp_path / "out")
    manifest = tomllib.loads((result.folder / "openenv.toml").read_text())
    assert manifest["api"] == "v1" and manifest["entry"] == "my_env:Tasks" and "package" not in manifest
    assert manifest["dependencies"][:2] == ["numpy", "verifiers<0.5,>=0.4"]
    assert {"openai", "mcp==2.0.0"} <= set(manifest["dependencies"])  # what its harness programs run on
    # the package folder itself is a source too: it is loaded under its own name
    [inner] = import_environment(source / "my_env", "v1-inner", tmp_path / "out")
    manifest = tomllib.loads((inner.folder / "openenv.toml").read_text())
    assert (manifest["entry"], manifest["package"]) == ("my_env:Tasks", "my_env")


def test_v1_packages_that_verifiers_would_not_load_are_refused(tmp_path):
    with pytest.raises(ImportFailedError, match=r"pins verifiers<0\.4.*needs verifiers 0\.4"):
        import_environment(v1_package(tmp_path / "a", pins=("verifiers<0.4",)), "old", tmp_path / "out")
    with pytest.raises(ImportFailedError, match=r"no package lists it in its __init__\.py's __all__"):
        import_environment(v1_package(tmp_path / "b", exported="Data"), "hidden", tmp_path / "out")
    harness = write(tmp_path / "c", {  # Verifiers' own environments/compact: a harness, not an environment
        "compact/__init__.py": "from compact.harness import Compacting\n__all__ = ['Compacting']\n",
        "compact/harness.py": "from verifiers.v1.harness import Harness\nclass Compacting(Harness): ...\n"})
    with pytest.raises(ImportFailedError, match=r"a Verifiers v1 harness package \(Compacting\).*not an environment"):
        import_environment(harness, "compact", tmp_path / "out")


def test_pre_0_1_8_sources_and_pins_are_refused(tmp_path):
    old = CLASSIC + "\nclass Old(vf.MultiTurnEnv):\n    def is_completed(self, messages, state):\n        return True\n"
    with pytest.raises(ImportFailedError, match=r"before 0\.1\.8"):
        import_environment(write(tmp_path / "a", {"my_env.py": old}), "old", tmp_path / "out")
    source = write(tmp_path / "b", {"my_env.py": CLASSIC, "pyproject.toml": pyproject("verifiers==0.1.7")})
    with pytest.raises(ImportFailedError, match="holds no release of the classic API"):
        import_environment(source, "pinned", tmp_path / "out")


def test_hazards_are_reported(tmp_path):
    risky = CLASSIC + '''
import os, random
from datasets import load_dataset
from openai import AsyncOpenAI


def build():
    rows = load_dataset("gsm8k", "main")
    random.shuffle(rows)
    judge = AsyncOpenAI(api_key=os.environ["OPENAI_API_KEY"])
    return os.getenv("JUDGE_MODEL"), judge
'''
    (result,) = import_environment(write(tmp_path / "src", {"my_env.py": risky}), "risky", tmp_path / "out")
    notes = " | ".join(result.notes)
    assert "downloads data at load time" in notes and "needs an API key" in notes
    assert "reads environment variables: JUDGE_MODEL, OPENAI_API_KEY" in notes and "unseeded randomness" in notes
    (quiet,) = import_environment(write(tmp_path / "ok", {"my_env.py": CLASSIC}), "quiet", tmp_path / "out")
    assert [n for n in quiet.notes if "pin" not in n] == []


def test_hazards_in_helper_modules_and_unseeded_dataset_shuffles_are_reported(tmp_path):
    helper = "import nltk\n\ndef tokenizer():\n    nltk.download('punkt', quiet=True)\n"
    shuffled = CLASSIC + "\ndef rows(dataset):\n    return dataset.shuffle().select(range(10))\n"
    (result,) = import_environment(write(tmp_path / "src", {"my_env.py": shuffled, "text_utils.py": helper}),
                                   "nltk", tmp_path / "out")
    notes = " | ".join(result.notes)
    assert "downloads data at load time" in notes and "shuffles a dataset without a seed" in notes
    seeded = CLASSIC + "\ndef rows(dataset):\n    return dataset.shuffle(seed=7)\n"
    (ok,) = import_environment(write(tmp_path / "ok", {"my_env.py": seeded}), "seeded", tmp_path / "out")
    assert not any("shuffle" in n for n in ok.notes)


def test_not_verifiers(tmp_path):
    for code in ["def load_environment():\n    return 1\n", "import verifiers\n# load_environment\n"]:
        source = write(tmp_path / "src", {"e.py": code})
        assert detect_all(source) == []


def test_the_declared_description_is_what_list_shows(tmp_path):
    source = write(tmp_path / "src", {"my_env.py": CLASSIC, "pyproject.toml": pyproject("verifiers>=0.2")
                                      + 'description = "Two plus two"\n'})
    (result,) = import_environment(source, "described", tmp_path / "out")
    assert tomllib.loads((result.folder / "openenv.toml").read_text())["description"] == "Two plus two"

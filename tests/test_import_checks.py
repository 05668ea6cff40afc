"""Imports as users make them: an OpenEnv project in every import style its own runner accepts imports and plays,
and whatever `serve` would fail on fails the import instead, with the file, the line and what to do."""

import json
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest
from conftest import in_parallel, write_files
from openenv_styles import STYLES, write_project

from openenv_gym.client.local import LocalServer
from openenv_gym.importers import ImportFailedError, import_environment
from openenv_gym.manifests import load_manifest
from openenv_gym.manifests.venvs import ensure_venv


def _style_source():
    import tempfile
    from pathlib import Path

    return write_project(Path(tempfile.mkdtemp(prefix="openenv-style-")), "relative")


pytestmark = pytest.mark.env_venvs.with_args(_style_source)  # the styles share one dependency set: one venv


EXPECTED = {  # style -> (package, entry, action) as the manifest names them
    "relative": ("counter_relative", "counter_relative.server.counter_environment:CounterEnvironment",
                 "counter_relative.models:CounterAction"),
    "absolute": ("counter_absolute", "counter_absolute.server.counter_environment:CounterEnvironment",
                 "counter_absolute.models:CounterAction"),
    "bare": (None, "server.counter_environment:CounterEnvironment", "models:CounterAction"),
    "chained": ("counter_chained", "counter_chained.server.counter_environment:CounterEnvironment",
                "counter_chained.models:CounterAction"),
    "factory": ("counter_factory", "counter_factory.server.counter_environment:CounterEnvironment",
                "counter_factory.models:CounterAction"),
    "path_setup": ("counter_path_setup", "counter_path_setup.server.counter_environment:CounterEnvironment",
                   "counter_path_setup.models:CounterAction"),
}
GOALS = {"factory": 5}  # the factory makes the environment with its own goal; the others' is ten


@pytest.fixture(scope="module")
def every_style(tmp_path_factory):
    """Each style's project imported as users import it (its load check included) and served: all at once, as the
    imports and the servers mostly wait on their subprocesses."""
    def imported(style: str, folder: Path):
        [result] = import_environment(write_project(folder / "src", style), f"counter-{style}", folder / "out")
        return result.folder

    scratch = {style: tmp_path_factory.mktemp(style) for style in STYLES}  # (the factory is not for threads)
    folders = in_parallel(*(lambda style=style: imported(style, scratch[style]) for style in STYLES))
    servers = in_parallel(*(lambda folder=folder: LocalServer(str(folder), 1, 10) for folder in folders))
    yield {style: (folder, server) for style, folder, server in zip(STYLES, folders, servers, strict=True)}
    in_parallel(*(server.stop for server in servers))


@pytest.mark.parametrize("style", STYLES)
def test_every_import_style_imports_and_plays_on_a_real_server(every_style, style):
    folder, server = every_style[style]
    manifest = load_manifest(folder)
    assert (manifest.package, manifest.entry, manifest.action) == EXPECTED[style]
    assert manifest.app == (f"{manifest.package}.server.app" if manifest.package else "server.app")
    assert manifest.factory == ("counter_factory.server.app:create_counter_environment" if style == "factory" else None)
    goal = GOALS.get(style, 10)
    env = gym.make("openenv/remote", base_url=server.url)
    obs, info = env.reset(seed=0)
    assert json.loads(obs)["total"] == 0
    obs, reward, terminated, truncated, info = env.step({"delta": 4})
    assert (json.loads(obs)["total"], reward, terminated) == (4, 4.0, False)
    obs, reward, terminated, truncated, info = env.step({"delta": goal - 4})
    assert (json.loads(obs)["total"], terminated) == (goal, True)
    env.close()


def _broken(tmp_path, style: str, line: str, before: str = "from uuid import uuid4"):
    """The counter project in `style`, with `line` put into its environment module before `before`."""
    source = write_project(tmp_path / "src", style)
    module = source / "server" / "counter_environment.py"
    module.write_text(module.read_text().replace(before, f"{line}\n{before}", 1))
    return source


@pytest.mark.parametrize(("style", "line", "says"), [
    ("relative", "import frobnicator_lib", r"server/counter_environment\.py, line 1 \(import frobnicator_lib\): "
                                           r"ModuleNotFoundError: No module named 'frobnicator_lib'; the module "
                                           r"'frobnicator_lib' is not installed: add the distribution"),
    ("bare", "from ..models import CounterAction", r"server/counter_environment\.py, line 1 \(from \.\.models import "
                                                   r"CounterAction\): ImportError: attempted relative import .* as top-"
                                                   r"level modules of its folder.* package-dir"),
    ("relative", "from email import genai", r"server/counter_environment\.py, line 1 .*ImportError: cannot import "
                                            r"name 'genai' from 'email'.*the installed module 'email' lacks what the "
                                            r"source imports from it"),  # as `from google import genai`
    ("relative", "raise SystemExit('no display')", r"server/counter_environment\.py, line 1 .*SystemExit: no display; "
                                                   r"the environment's code fails as it loads"),
])
def test_an_import_that_serve_would_not_load_fails_with_the_file_and_the_line(tmp_path, style, line, says):
    with pytest.raises(ImportFailedError, match=rf"(?s)does not load as `openenv-gym serve` would .*{says}"):
        import_environment(_broken(tmp_path, style, line), "broken", tmp_path / "out")
    assert not (tmp_path / "out" / "broken").exists()  # nothing left behind


def test_an_environment_that_loads_past_the_bound_fails_the_import_saying_why(tmp_path, monkeypatch, capfd):
    """A load that would hold up every server start (an endless dataset made whole, a download) is cut at the load
    check's bound, with what to do; nothing is left behind."""
    from openenv_gym.importers import loadcheck

    monkeypatch.setattr(loadcheck, "LOAD_TIMEOUT", 2.0)
    with pytest.raises(ImportFailedError, match=r"took longer than 2 s.*endless dataset.*--no-check"):
        import_environment(_broken(tmp_path, "relative", "import time; time.sleep(60)"), "slow", tmp_path / "out")
    assert not (tmp_path / "out" / "slow").exists()
    assert "loading slow as a server would (at most 2 s; --no-check skips it)" in capfd.readouterr().err


@pytest.mark.bench  # a venv build and two checks (14 s): make bench runs it
def test_venvs_build_and_check_say_the_same_of_an_environment_imported_unchecked(tmp_path):
    [result] = import_environment(_broken(tmp_path, "relative", "import frobnicator_lib"), "unchecked",
                                  tmp_path / "out", check=False)
    checked = subprocess.run([sys.executable, "-m", "openenv_gym", "venvs", "check", str(result.folder), "--json"],
                             capture_output=True, text=True, timeout=300)
    assert checked.returncode == 1
    problem = json.loads(checked.stdout.strip().splitlines()[-1])
    assert problem["where"] == "server/counter_environment.py, line 1" and "frobnicator_lib" in problem["error"]
    built = subprocess.run([sys.executable, "-m", "openenv_gym", "venvs", "build", str(result.folder)],
                           capture_output=True, text=True, timeout=300)
    assert built.returncode != 0 and "frobnicator_lib" in built.stderr and "line 1" in built.stderr
    fine = import_environment(write_project(tmp_path / "fine", "absolute"), "fine", tmp_path / "out", check=False)
    assert subprocess.run([sys.executable, "-m", "openenv_gym", "venvs", "check", str(fine[0].folder)],
                          capture_output=True, text=True, timeout=300).stdout.strip() == "fine loads as the server " \
                                                                                         "will load it"


def test_nothing_found_says_what_an_awm_source_looks_like(tmp_path):
    partial = write_files(tmp_path / "part", {"gen_tasks.jsonl": "", "gen_db.jsonl": ""})
    with pytest.raises(ImportFailedError, match=r"part of an AWM dataset \(gen_db\.jsonl, gen_tasks\.jsonl\) without "
                                                r"gen_envs\.jsonl"):
        import_environment(partial, "x", tmp_path / "out")
    pipeline = write_files(tmp_path / "agent-world-model", {"awm/core/server.py": "", "README.md": ""})
    with pytest.raises(ImportFailedError, match=r"Agent World Model's repository.*hf download "
                                                r"Snowflake/AgentWorldModel-1K"):
        import_environment(pipeline, "x", tmp_path / "out")


def test_unseeded_randomness_is_located_and_said_for_what_it_affects(tmp_path):
    source = _broken(tmp_path, "relative", "import random", before="from uuid import uuid4")
    module = source / "server" / "counter_environment.py"
    module.write_text(module.read_text().replace("self._total = 0\n        return", "self._total = random.randint(0, 3)"
                                                                                 "\n        return"))
    [result] = import_environment(source, "random", tmp_path / "out")
    [note] = [n for n in result.notes if "randomness" in n]
    assert note.startswith("uses unseeded randomness (random.randint() in server/counter_environment.py, line ")
    assert "the same reset seed may not give the same episode" in note and "dataset" not in note


@pytest.mark.bench  # a venv build of its own (17 s): make bench runs it
def test_a_pin_to_openenvs_git_repository_is_replaced_by_the_release(tmp_path):
    """OpenEnv's dm_control_env and unity_env pin `openenv[core] @ git+https://github.com/huggingface/OpenEnv.git`,
    which cannot be reached here and is not the API this adapter speaks: the release is installed instead."""
    source = write_project(tmp_path / "src", "relative")
    pyproject = source / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace(
        '"openenv==0.10.0"', '"openenv[core] @ git+https://github.com/huggingface/OpenEnv.git", "numpy>=1.24"'))
    [result] = import_environment(source, "git-pinned", tmp_path / "out")
    assert result.dependencies == ["numpy>=1.24", "openenv>=0.10"]
    assert any("openenv[core] @ git+https://github.com/huggingface/OpenEnv.git replaced by openenv>=0.10" in note
               for note in result.notes)


LOCK = """
version = 1

[[package]]
name = "six"
version = "1.16.0"
source = {{ registry = "https://pypi.org/simple" }}

[[package]]
name = "pydantic"
version = "{pydantic}"
source = {{ registry = "https://pypi.org/simple" }}
"""


@pytest.mark.bench  # two venv builds of their own (25 s): make bench runs it
@pytest.mark.parametrize(("pydantic", "installed_six"), [("2.11.7", "1.16.0"), ("1.10.13", None)])
def test_the_projects_uv_lock_pins_its_dependencies_where_they_fit(tmp_path, pydantic, installed_six):
    """As OpenEnv's runner installs a project (`uv sync --frozen`), its direct dependencies are installed at the
    versions its uv.lock pins; pins that do not fit the SDK this adapter needs (pydantic 1) are dropped whole."""
    source = write_project(tmp_path / "src", "relative")
    pyproject = source / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('"openenv==0.10.0"', '"openenv==0.10.0", "six", "pydantic"'))
    (source / "uv.lock").write_text(LOCK.format(pydantic=pydantic))
    [result] = import_environment(source, "locked", tmp_path / "out")
    manifest = load_manifest(result.folder)
    assert manifest.constraints == ["six==1.16.0", f"pydantic=={pydantic}"]
    python = ensure_venv(manifest)
    versions = subprocess.run([str(python), "-c", "import six, pydantic; print(six.__version__, pydantic.VERSION)"],
                              capture_output=True, text=True, check=True).stdout.split()
    assert versions[1].startswith("2.")  # openenv 0.10 needs pydantic 2: a lock that says 1 is not followed
    if installed_six is not None:
        assert versions == [installed_six, pydantic]

"""The wheel, as a user installs it: built by `uv build`, it holds the shipped environments, the web page's assets
and the licence, and installed into a fresh venv (no checkout on its path) it lists the environments and plays the
demo."""

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import ROOT
from uv import find_uv_bin

UV = find_uv_bin()


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run([UV, "build", "--wheel", "--out-dir", str(out), str(ROOT)], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    (built,) = out.glob("openenv_gym-*.whl")
    return built


def test_the_wheel_holds_the_shipped_environments_the_web_page_the_verifiers_taskset_and_the_licence(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    shipped = {path.relative_to(ROOT / "servers").as_posix() for path in (ROOT / "servers").rglob("*")
               if path.is_file() and "__pycache__" not in path.parts}
    assert shipped and {f"openenv_gym/_servers/{name}" for name in shipped} <= names
    web = {path.name for path in (ROOT / "openenv_gym" / "web").iterdir() if path.suffix in (".html", ".js", ".css")}
    assert web and {f"openenv_gym/web/{name}" for name in web} <= names
    taskset = {path.name for path in (ROOT / "openenv_gym_verifiers").glob("*.py")}  # (prime-rl imports it by name)
    assert "__init__.py" in taskset and {f"openenv_gym_verifiers/{name}" for name in taskset} <= names
    assert any(name.endswith(".dist-info/licenses/LICENSE") for name in names)


def test_installed_from_the_wheel_it_lists_and_plays(wheel, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([UV, "venv", "--quiet", "--python", sys.executable, str(venv)], check=True, timeout=120)
    done = subprocess.run([UV, "pip", "install", "--quiet", "--python", str(venv / "bin" / "python"), str(wheel)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    environment = {**os.environ, "OPENENV_GYM_HOME": str(tmp_path / "home")}
    environment.pop("PYTHONPATH", None)

    def run(*command: str) -> subprocess.CompletedProcess:
        return subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=tmp_path, env=environment)

    where = run(str(venv / "bin" / "python"), "-c", "import openenv_gym; print(openenv_gym.__file__)")
    assert where.stdout.startswith(str(venv)), where  # the installed package, not the checkout
    listed = run(str(venv / "bin" / "openenv-gym"), "list")
    assert listed.returncode == 0, listed.stderr
    ids = [line.split()[0] for line in listed.stdout.splitlines()]
    assert {"openenv/echo", "openenv/guess"} <= set(ids)
    demo = run(str(venv / "bin" / "python"), str(ROOT / "examples" / "demo.py"), "--episodes", "20")
    assert demo.returncode == 0, demo.stderr
    summary = demo.stdout.splitlines()[-1]
    assert summary.startswith("20 episodes") and float(summary.rsplit(" ", 1)[1]) > 0.5, demo.stdout

"""Venvs of imported environments: one per resolved dependency set, failed builds removed, list and clean."""

import subprocess
import sys

import pytest

from openenv_gym.manifests.schema import PythonManifest
from openenv_gym.manifests.venvs import (
    VenvBuildError,
    clean_venvs,
    ensure_venv,
    list_venvs,
    requirements_key,
    venv_path,
    venvs_dir,
)


@pytest.fixture
def venvs(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENENV_GYM_VENVS", str(tmp_path / "venvs"))
    return tmp_path / "venvs"


def manifest(name: str, *dependencies: str) -> PythonManifest:
    return PythonManifest(name=name, entry="env:Env", dependencies=list(dependencies), folder=venvs_dir())


def test_requirement_lists_spelt_differently_share_a_key():
    assert requirements_key(manifest("a", "Typing_Extensions>=4.0", "six")) == \
        requirements_key(manifest("b", "six", "typing-extensions >= 4.0"))
    assert requirements_key(manifest("a", "six")) != requirements_key(manifest("b", "six<1"))


@pytest.mark.timeout(600)
def test_lists_that_resolve_alike_share_one_venv_and_clean_removes_the_unused(venvs, capfd):
    plain, pinned = manifest("plain", "six"), manifest("pinned", "six>=1.0")
    first = ensure_venv(plain)
    second = ensure_venv(pinned)  # built, found to hold the same packages, and removed for the first
    assert first == second and venv_path(plain) == venv_path(pinned)
    assert subprocess.run([str(first), "-c", "import six, openenv_gym"], check=False).returncode == 0
    # installed with its bytecode (-B: this check writes none), so no process started there compiles it again
    compiled = "import importlib.util, os, six; print(os.path.exists(importlib.util.cache_from_source(six.__file__)))"
    assert subprocess.run([str(first), "-B", "-c", compiled], capture_output=True, text=True).stdout.strip() == "True"
    err = capfd.readouterr().err
    assert err.count("openenv-gym: building") == 2 and "Resolved" not in err  # uv's output goes to its log
    (entry,) = list_venvs([plain, pinned])
    assert entry["ready"] and entry["envs"] == ["pinned", "plain"] and entry["bytes"] > 0
    (venvs / "index.json").unlink()  # as an older openenv_gym left it: a venv found by its key alone
    assert [e["envs"] for e in list_venvs([plain, pinned])] == [["plain"]] and venv_path(plain) == first.parent.parent
    assert clean_venvs([plain, pinned]) == []  # in use
    removed = clean_venvs([])  # no registered environment uses it any more
    assert [e["name"] for e in removed] == [entry["name"]] and list_venvs([]) == []
    assert not venv_path(plain).exists()


@pytest.mark.timeout(600)
@pytest.mark.parametrize(("installer", "says"), [("uv", "not found in the package registry"),
                                                 ("pip", "No matching distribution")])
def test_a_failed_build_says_why_and_leaves_nothing(venvs, monkeypatch, installer, says):
    monkeypatch.setenv("OPENENV_GYM_INSTALLER", installer)
    broken = manifest("broken", "openenv-gym-no-such-package-anywhere==0.0.1")
    expected = rf"(?s)failed \({installer} exited with 1\)\. The end of its log .*{says}"
    with pytest.raises(VenvBuildError, match=expected):
        ensure_venv(broken)
    assert [p.name for p in venvs.iterdir() if p.is_dir()] == ["logs"]  # the log stays, the build does not
    assert list_venvs([broken]) == []


def test_the_cli_lists_and_cleans(venvs):
    (venvs / "abandoned").mkdir(parents=True)  # a build that was killed: no ready marker
    listed = subprocess.run([sys.executable, "-m", "openenv_gym", "venvs", "list"], capture_output=True, text=True,
                            check=True).stdout
    assert "abandoned" in listed and "failed or unfinished" in listed
    cleaned = subprocess.run([sys.executable, "-m", "openenv_gym", "venvs", "clean"], capture_output=True,
                             text=True, check=True).stdout
    assert "removed abandoned" in cleaned and not (venvs / "abandoned").exists()

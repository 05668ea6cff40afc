"""The manifest schema: one model per kind, read and validated once; every mistake named with its key and file."""

import subprocess
import sys
import warnings

import pytest
from conftest import write_files

from openenv_gym.manifests import (
    ManifestError,
    OrsManifest,
    PythonManifest,
    VerifiersManifest,
    load_manifest,
)
from openenv_gym.manifests.discovery import imported_manifests
from openenv_gym.manifests.home import record_dir

ECHO_LIKE = 'name = "mine"\nentry = "mine:Mine"\n'


def manifest_in(folder, text):
    return write_files(folder, {"openenv.toml": text}) / "openenv.toml"


@pytest.mark.parametrize("text, model", [
    (ECHO_LIKE, PythonManifest),
    (ECHO_LIKE + 'kind = "ors"\nmax_steps = 7\ndependencies = ["openreward"]\n', OrsManifest),
    (ECHO_LIKE + 'kind = "verifiers"\n[env_args]\nmax_turns = 3\n', VerifiersManifest),
])
def test_each_kind_has_its_model(tmp_path, text, model):
    manifest = load_manifest(manifest_in(tmp_path, text).parent)
    assert type(manifest) is model and manifest.folder == tmp_path.resolve()
    assert manifest.gym_id == f"openenv/{model.id_prefix}mine"


def test_kind_specific_values_are_typed(tmp_path):
    ors = load_manifest(manifest_in(tmp_path / "a", ECHO_LIKE + 'kind = "ors"\n').parent)
    assert ors.max_steps == 100 and ors.vendored == ors.folder / "vendor"
    text = ECHO_LIKE + 'kind = "verifiers"\nenv_args = {x = 1}\n'
    verifiers = load_manifest(manifest_in(tmp_path / "b", text).parent)
    assert verifiers.env_args == {"x": 1}


@pytest.mark.parametrize("text, message", [
    (ECHO_LIKE + 'dependecies = ["numpy"]\n', "unknown key 'dependecies' (did you mean 'dependencies'?)"),
    (ECHO_LIKE + 'colour = "blue"\n',
     "unknown key 'colour' (known keys: constraints, dependencies, description, deterministic, entry, kind, limits, "
     "name, network, npm, python, python_resolve_as, runs_code)"),
    (ECHO_LIKE + 'kind = "ors"\nenv_args = {a = 1}\n', "unknown key 'env_args'"),  # verifiers only
    (ECHO_LIKE + 'kind = "verifiers"\nmax_steps = 5\n', "unknown key 'max_steps'"),  # ors only
    (ECHO_LIKE + 'kind = "ors"\nmax_steps = "many"\n', "key 'max_steps': Input should be a valid integer"),
    (ECHO_LIKE + 'kind = "ors"\nmax_steps = 0\n', "key 'max_steps': Input should be greater than 0"),
    (ECHO_LIKE + 'kind = "docker"\n', "unknown kind 'docker'; known kinds: python, ors, verifiers"),
    ('entry = "mine:Mine"\n', "key 'name': Field required"),
    ('name = "mine"\nentry = "not an entry"\n', "key 'entry': String should match pattern"),
    ("name = [unclosed\n", "is not valid TOML"),
])
def test_mistakes_are_refused_naming_the_key_and_the_file(tmp_path, text, message):
    path = manifest_in(tmp_path, text)
    with pytest.raises(ManifestError) as caught:
        load_manifest(tmp_path)
    assert str(caught.value).startswith(str(path)) and message in str(caught.value)


def test_a_missing_manifest_says_what_a_folder_needs(tmp_path):
    with pytest.raises(ManifestError, match=r"an environment folder needs an openenv\.toml"):
        load_manifest(tmp_path)


def test_a_broken_import_is_skipped_with_a_warning_naming_it(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENENV_GYM_HOME", str(tmp_path / "home"))  # a registry of its own
    write_files(tmp_path / "out", {"good/openenv.toml": ECHO_LIKE.replace("mine", "good"),
                                   "bad/openenv.toml": ECHO_LIKE + "typo_key = 1\n"})
    record_dir(tmp_path / "out")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        names = [m.name for m in imported_manifests()]
    assert "good" in names and "mine" not in names
    (warning,) = [w for w in caught if "typo_key" in str(w.message)]
    assert "bad/openenv.toml" in str(warning.message) and "not registered" in str(warning.message)


def test_serve_refuses_a_misspelt_manifest_with_its_message(tmp_path):
    manifest_in(tmp_path, ECHO_LIKE + "max_step = 3\n")
    done = subprocess.run([sys.executable, "-m", "openenv_gym", "serve", str(tmp_path), "--port", "0"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "unknown key 'max_step'" in done.stderr and "openenv.toml" in done.stderr


def test_a_name_that_already_carries_the_kind_is_not_prefixed_twice(tmp_path):
    text = ECHO_LIKE.replace('name = "mine"', 'name = "ors-x"') + 'kind = "ors"\n'
    assert load_manifest(manifest_in(tmp_path, text).parent).gym_id == "openenv/ors-x"
    text = ECHO_LIKE.replace('name = "mine"', 'name = "orsx"') + 'kind = "ors"\n'
    assert load_manifest(manifest_in(tmp_path / "b", text).parent).gym_id == "openenv/ors-orsx"


def test_env_args_for_an_ors_environment_are_refused_in_good_english(tmp_path):
    from openenv_gym.adapters import load_factory
    from openenv_gym.manifests import ManifestError

    manifest = load_manifest(manifest_in(tmp_path, ECHO_LIKE + 'kind = "ors"\n').parent)
    with pytest.raises(ManifestError, match="mine is an ors environment, which takes no env_args"):
        load_factory(manifest, {"max_turns": 3})

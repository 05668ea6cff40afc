"""openenv-gym import: AST detection (nothing is run), vendoring without secrets, manifests, the registry."""

import subprocess
import sys
import tomllib
from functools import partial
from pathlib import Path

import pytest
from conftest import write_files as write

from openenv_gym.importers import ImportFailedError, detect_all
from openenv_gym.importers import import_environment as import_and_check
from openenv_gym.manifests import find_manifest, load_manifest
from openenv_gym.manifests.home import registered_dirs

# The sources here are written to be read (detection, vendoring, notes), not run: imported without loading them.
# tests/test_import_checks.py imports sources the way users do, loading each as the server will.
import_environment = partial(import_and_check, check=False)

ORS_ENV = '''
from openreward.environments import Environment, tool

raise SystemExit("detection must never run the source")


class Counter(Environment):
    """Count to ten, one call at a time."""
'''


@pytest.mark.parametrize("code, sdk", [
    ("from openreward.environments import Environment\nclass A(Environment): ...", "openreward"),
    ("from openreward import environments\nclass A(environments.Environment): ...", "openreward"),
    ("import openreward.environments as orw\nclass A(orw.Environment): ...", "openreward"),
    ("from openreward.environments.environment import Environment as Base\nclass A(Base): ...", "openreward"),
    ("import ors\nclass A(ors.Environment): ...", "ors-sdk"),
    ("from ors import Environment\nfrom typing import Generic\nclass A(Environment, Generic[int]): ...", "ors-sdk"),
    ("from ors import Environment\nclass A(Environment[int]): ...", "ors-sdk"),
])
def test_detects_ors_environments_without_running_them(tmp_path, code, sdk):
    source = write(tmp_path / "src", {"env.py": code})
    (found,) = detect_all(source)
    assert (found.kind, found.entry) == ("ors", "env:A")
    (result,) = import_environment(source, "a", tmp_path / "out")
    assert result.dependencies == [sdk]


@pytest.mark.parametrize("code", [
    "# Environment from openreward\nx = 'class A(Environment): from openreward import Environment'",
    "from gymnasium import Env as Environment\nclass A(Environment): ...",
    "class Environment: ...\nclass A(Environment): ...",
    "from openreward import Environment\ndef f():\n    class Inner(Environment): ...",
    "from openrewardish import Environment\nclass A(Environment): ...",
    "this is not python (",
])
def test_detection_negatives(tmp_path, code):
    source = write(tmp_path / "src", {"env.py": code})
    assert detect_all(source) == []
    with pytest.raises(ImportFailedError, match=r"no environment found .* looked for a top-level class"):
        import_environment(source, "x", tmp_path / "out")


def test_import_writes_manifest_and_vendored_source_and_records_the_folder(tmp_path):
    source = write(tmp_path / "src", {"counter.py": ORS_ENV, "helpers/util.py": "X = 1\n",
                                      "pyproject.toml": '[project]\nname = "c"\ndependencies = ["numpy>=1.26"]\n'})
    data = write(tmp_path / "data", {"tasks.json": "[]"}) / "tasks.json"
    out = tmp_path / "servers"
    (result,) = import_environment(source, "counter", out, data=[data])
    assert result.gym_id == "openenv/ors-counter"
    manifest = tomllib.loads((out / "counter" / "openenv.toml").read_text())
    assert manifest["kind"] == "ors" and manifest["entry"] == "counter:Counter"
    assert manifest["dependencies"] == ["numpy>=1.26", "openreward"]  # declared ones plus the SDK it imports
    assert manifest["source_hash"].startswith("sha256:") and manifest["imported_from"] == str(source.resolve())
    assert manifest["description"] == "Count to ten, one call at a time."  # no description declared: the docstring
    vendored = out / "counter" / "vendor"
    assert (vendored / "counter.py").read_text() == (source / "counter.py").read_text()
    assert (vendored / "helpers" / "util.py").exists() and (vendored / "tasks.json").exists()
    assert out.resolve() in registered_dirs()
    assert find_manifest("counter").folder == (out / "counter").resolve()
    assert load_manifest(out / "counter").gym_id == "openenv/ors-counter"


def test_secrets_and_junk_are_left_out_and_reported(tmp_path):
    source = write(tmp_path / "src", {
        "env.py": ORS_ENV, ".env": "KEY=1", ".env.local": "KEY=2", "id_rsa": "key", "id_rsa.pub": "pub",
        "server.pem": "x", "private.key": "x", "cert.p12": "x", "secrets.toml": "x", "credentials.json": "{}",
        ".git/config": "x", "__pycache__/env.cpython-311.pyc": "x", ".venv/pyvenv.cfg": "home = /usr",
        "myvenv/pyvenv.cfg": "home = /usr", "dist/pkg.whl": "x", "pkg.egg-info/PKG-INFO": "x",
        "notes.md": "keep me"})
    (result,) = import_environment(source, "leaky", tmp_path / "out")
    vendored = {p.relative_to(result.folder / "vendor").as_posix()
                for p in (result.folder / "vendor").rglob("*") if p.is_file()}
    assert vendored == {"env.py", "notes.md"}
    left_out = {path.as_posix() for path, _ in result.report.left_out}
    assert {".env", ".env.local", "id_rsa", "id_rsa.pub", "server.pem", "private.key", "cert.p12", "secrets.toml",
            "credentials.json", ".git", "__pycache__", ".venv", "myvenv", "dist", "pkg.egg-info"} <= left_out


def test_ors_imports_report_hazards(tmp_path):
    risky = ORS_ENV + "\nimport os\nfrom datasets import load_dataset\nROWS = load_dataset('gsm8k')\n" \
        "KEY = os.environ['OPENAI_API_KEY']\n"
    (result,) = import_environment(write(tmp_path / "src", {"env.py": risky}), "risky", tmp_path / "out")
    notes = " | ".join(result.notes)
    assert "downloads data at load time" in notes and "reads environment variables: OPENAI_API_KEY" in notes
    (quiet,) = import_environment(write(tmp_path / "ok", {"env.py": ORS_ENV}), "quiet", tmp_path / "out")
    assert quiet.notes == []


def test_several_classes_get_an_id_each_or_env_picks_one(tmp_path):
    source = write(tmp_path / "src", {"envs.py": """
        from openreward.environments import Environment
        class Base(Environment): ...
        class Hard(Base): ...
        """})
    results = import_environment(source, "multi", tmp_path / "out")
    assert sorted(r.gym_id for r in results) == ["openenv/ors-multi-base", "openenv/ors-multi-hard"]
    (hard,) = import_environment(source, "one", tmp_path / "out2", env_class="Hard")
    assert hard.detected.entry == "envs:Hard"
    with pytest.raises(ImportFailedError, match="not among the environments found: envs:Base, envs:Hard"):
        import_environment(source, "none", tmp_path / "out3", env_class="Missing")


def test_existing_name_is_refused_unless_forced(tmp_path):
    source = write(tmp_path / "src", {"env.py": ORS_ENV.replace("Counter", "A")})
    import_environment(source, "same", tmp_path / "out")
    with pytest.raises(ImportFailedError, match=r"already exists.*--force"):
        import_environment(source, "same", tmp_path / "out")
    write(source, {"env.py": ORS_ENV.replace("Counter", "B")})
    (result,) = import_environment(source, "same", tmp_path / "out", force=True)
    assert result.detected.attribute == "B"


@pytest.mark.parametrize("module", ["json.py", "pydantic.py", "openreward/__init__.py"])
def test_modules_that_would_shadow_others_are_refused_unless_forced(tmp_path, module):
    source = write(tmp_path / "src", {"env.py": ORS_ENV, module: "X = 1\n"})
    with pytest.raises(ImportFailedError, match="would shadow"):
        import_environment(source, "shadow", tmp_path / "out")
    import_environment(source, "shadow", tmp_path / "out", force=True)


def test_bad_inputs_are_clear_errors(tmp_path):
    with pytest.raises(ImportFailedError, match="does not exist"):
        import_environment(tmp_path / "missing", "x", tmp_path / "out")
    source = write(tmp_path / "src", {"env.py": ORS_ENV})
    with pytest.raises(ImportFailedError, match="--name"):
        import_environment(source, "bad name!", tmp_path / "out")
    with pytest.raises(ImportFailedError, match="outside the source"):
        import_environment(source, "inside", source)


def test_cli_import_reports_what_it_did(tmp_path):
    source = write(tmp_path / "src", {"env.py": ORS_ENV, ".env": "SECRET=1"})
    done = subprocess.run([sys.executable, "-m", "openenv_gym", "import", str(source), "--no-check", "--name", "cli",
                           "--output-dir", str(tmp_path / "out")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "as openenv/ors-cli" in done.stdout and "left out .env: may hold secrets" in done.stdout
    again = subprocess.run([sys.executable, "-m", "openenv_gym", "import", str(source), "--no-check", "--name", "cli",
                            "--output-dir", str(tmp_path / "out")], capture_output=True, text=True, timeout=60)
    assert again.returncode != 0 and "already exists" in again.stderr


def test_a_source_that_is_not_valid_python_is_reported_with_file_and_line(tmp_path):
    source = write(tmp_path / "src", {"env.py": ORS_ENV.replace("class ", "clas ", 1), "ok.py": "X = 1\n"})
    with pytest.raises(ImportFailedError, match=r"no environment found") as failure:
        import_environment(source, "x", tmp_path / "out")
    message = str(failure.value)
    assert "env.py, line " in message and "SyntaxError" in message and "ok.py" not in message


def _vendored_files(result) -> set[str]:
    root = result.folder / "vendor"
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() or p.is_symlink()}


def test_symbolic_links_never_lead_out_of_the_source_nor_loop(tmp_path):
    outside = write(tmp_path / "outside", {"passwd": "root:x:0:0", "tree/keys.txt": "k"})
    source = write(tmp_path / "src", {"env.py": ORS_ENV, "sub/util.py": "X = 1\n"})
    links = {"passwd": outside / "passwd", "etc": outside / "tree", "sub/loop": source, "self": source / "self",
             "dangling": source / "nowhere", "alias.py": source / "sub" / "util.py", "sub/up": source / "sub"}
    for name, target in links.items():
        (source / name).symlink_to(target)
    (result,) = import_environment(source, "links", tmp_path / "out")
    assert _vendored_files(result) == {"env.py", "sub/util.py", "alias.py"}
    assert not (result.folder / "vendor" / "alias.py").is_symlink()  # a link inside becomes a plain copy
    reasons = {path.as_posix(): why for path, why in result.report.left_out}
    assert reasons["passwd"] == reasons["etc"] == "a symbolic link that leaves the source"
    assert reasons["self"] == "a symbolic link loop" and reasons["dangling"] == "a dangling symbolic link"
    assert reasons["sub/loop"].startswith("a symbolic link to a folder")
    assert reasons["sub/up"].startswith("a symbolic link to a folder")


def test_secrets_are_found_by_name_folder_and_content(tmp_path):
    token = "ghp_" + "a1" * 18
    source = write(tmp_path / "src", {
        "env.py": ORS_ENV, ".git-credentials": "https://u:p@host", ".npmrc": "//r/:_authToken=x",
        ".ssh/config": "Host x", "deploy/authorized_keys": "ssh-ed25519 AAAA", "token.json": "{}",
        ".htpasswd": "u:$apr1$", "kubeconfig": "apiVersion: v1", ".kube/config": "apiVersion: v1",
        ".aws/config": "[default]", "gcp.json": '{"type": "service_account", "private_key": "abc"}',
        "notes.txt": "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn\n-----END OPENSSH PRIVATE KEY-----\n",
        "settings.py": f"GITHUB = {token!r}\n", "aws.py": "KEY = 'AKIA" + "A" * 16 + "'\n",
        "keep.py": "PROMPT = 'the private key of a good answer is sk-short'\n", "data.json": '{"private_key": ""}'})
    (result,) = import_environment(source, "leaky", tmp_path / "out")
    assert _vendored_files(result) == {"env.py", "keep.py", "data.json"}
    reasons = {path.as_posix(): why for path, why in result.report.left_out}
    assert {".git-credentials", ".npmrc", ".ssh", "deploy/authorized_keys", "token.json", ".htpasswd", "kubeconfig",
            ".kube", ".aws"} <= {path for path, why in reasons.items() if why == "may hold secrets"}
    assert reasons["gcp.json"] == "may hold secrets: holds a credential field"
    assert reasons["notes.txt"] == "may hold secrets: holds a private key"
    assert reasons["settings.py"] == reasons["aws.py"] == "may hold secrets: holds an access token"


def test_data_named_with_relative_paths_keeps_its_place(tmp_path, monkeypatch):
    source = write(tmp_path / "src", {"env.py": ORS_ENV})
    write(tmp_path / "work", {"data/train.jsonl": "{}\n", "data/more/x.txt": "x", "vocab.txt": "v",
                              "data/.env": "KEY=1"})
    write(tmp_path, {"shared/dict.txt": "d"})
    monkeypatch.chdir(tmp_path / "work")
    (result,) = import_environment(source, "data", tmp_path / "out",
                                   data=[Path("data"), Path("vocab.txt"), Path("../shared/dict.txt")])
    assert _vendored_files(result) == {"env.py", "data/train.jsonl", "data/more/x.txt", "vocab.txt", "dict.txt"}
    assert ("data/.env", "may hold secrets") in {(p.as_posix(), why) for p, why in result.report.left_out}
    with pytest.raises(ImportFailedError, match="names the working directory"):
        import_environment(source, "cwd", tmp_path / "out", data=[Path(".")])
    with pytest.raises(ImportFailedError, match=r"does not exist \(relative paths are read from"):
        import_environment(source, "missing", tmp_path / "out", data=[Path("nope.txt")])


def test_a_failed_import_leaves_nothing_behind_and_keeps_what_it_would_replace(tmp_path, monkeypatch):
    vendor = sys.modules["openenv_gym.importers.vendor"]  # the module: the package exports a function of its name
    source = write(tmp_path / "src", {"env.py": ORS_ENV, "blob.bin": "x" * 5000})
    out = tmp_path / "out"
    (first,) = import_environment(source, "atomic", out)
    monkeypatch.setattr(vendor, "MAX_TOTAL_BYTES", 4096)
    with pytest.raises(ImportFailedError, match=r"more than .* GiB \(at blob.bin\)"):
        import_environment(source, "atomic", out, force=True)
    with pytest.raises(ImportFailedError, match="more than"):
        import_environment(source, "fresh", out)
    assert sorted(p.name for p in out.iterdir()) == ["atomic"]  # no half-written folder, no staging left
    assert _vendored_files(first) == {"env.py", "blob.bin"}  # the earlier import is intact


def test_gym_ids_are_one_environments_each(tmp_path):
    """An import may not take a shipped environment's id or a remote id: refused with both named. Two imports of
    one name into two folders: the latest holds the id; the other is not registered, with a warning naming both."""
    guess = Path(__file__).parent / "openenv_envs" / "guess_env"  # an OpenEnv project: gym id openenv/NAME
    with pytest.raises(ImportFailedError, match=r"openenv/echo is held by the shipped python environment in .*echo"):
        import_environment(guess, "echo", tmp_path / "a")
    with pytest.raises(ImportFailedError, match=r"openenv/remote is held by the id that drives any running server"):
        import_environment(guess, "remote", tmp_path / "a")
    assert not (tmp_path / "a").exists()

    (first,) = import_environment(guess, "twice-imported", tmp_path / "a")
    (second,) = import_environment(guess, "twice-imported", tmp_path / "b")
    assert first.gym_id == second.gym_id == "openenv/twice-imported"
    with pytest.warns(RuntimeWarning, match=rf"not registered: {first.folder} \(its gym id openenv/twice-imported "
                                            rf"is held by the imported openenv environment in {second.folder}\)"):
        assert find_manifest("openenv/twice-imported").folder == second.folder
    import_environment(guess, "twice-imported", tmp_path / "a", force=True)  # imported again: the latest
    with pytest.warns(RuntimeWarning, match=f"not registered: {second.folder} "):
        assert find_manifest("twice-imported").folder == first.folder

"""openenv-gym import of built packages: a wheel, an sdist, or a name==version on a package index. The fixture's
dependencies are declared only in its metadata (pyproject.toml says they are dynamic; no requirements.txt); it is
built by a real build tool (uv build, with setuptools), and pip downloads it from an index made here, so the
downloads touch no network."""

import hashlib
import io
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

import pytest
from conftest import write_files as write

from openenv_gym.importers import ImportFailedError, import_environment
from openenv_gym.importers.packages import local_source
from openenv_gym.manifests import load_manifest
from openenv_gym.manifests.installer import pip_settings, uv_binary

# The ORS answer env, importing what only the package's metadata declares: without those, it does not load.
ENV = ("import email_validator  # noqa: F401  (a module of pydantic's `email` extra)\nimport tabulate  # noqa: F401\n"
       + (Path(__file__).parent / "ors_envs" / "answer" / "answer_env.py").read_text())
# What the metadata declares, as the import must record it: an extra and a marker kept, the `dev` extra's left out
# (it names no package anywhere, so a venv built with it would fail).
DEPENDENCIES = ["openreward", "pydantic[email]>=2", 'tabulate>=0.9; python_version >= "3.8"']
PYPROJECT = """
[project]
name = "answer-pkg"
version = "0.1.0"
description = "Answer the question."
dynamic = ["dependencies"]

[project.optional-dependencies]
dev = ["no-such-dependency-anywhere==0"]

[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[tool.setuptools]
packages = ["answer_pkg"]

[tool.setuptools.dynamic]
dependencies = {file = ["deps.in"]}
"""
WHEEL = "answer_pkg-0.1.0-py3-none-any.whl"


def _same_dependencies() -> str:
    """A plain source declaring what the package's metadata declares: the venv the imports below load in."""
    return str(write(Path(tempfile.mkdtemp(prefix="answer-")), {"env.py": ENV,
                                                                "requirements.txt": "\n".join(DEPENDENCIES)}))


pytestmark = pytest.mark.env_venvs.with_args(_same_dependencies)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, Path]:
    """The fixture's wheel and sdist, built by uv build with pip's settings of this machine (the build backend
    comes from pip's indexes), and a file:// simple index serving the wheel."""
    project = write(tmp_path_factory.mktemp("answer"), {"pyproject.toml": PYPROJECT, "deps.in": "\n".join(DEPENDENCIES),
                                                        "answer_pkg/__init__.py": "", "answer_pkg/env.py": ENV})
    dist = project / "dist"
    settings = pip_settings()
    flags = ["--build-constraints" if flag == "--constraint" else flag for flag in settings.flags]  # uv build's word
    subprocess.run([uv_binary(), "build", "--sdist", "--wheel", "--out-dir", str(dist), *flags, str(project)],
                   check=True, capture_output=True, env=os.environ | settings.environment, timeout=300)
    index = _index(tmp_path_factory.mktemp("index"), dist / WHEEL)
    return {"wheel": dist / WHEEL, "sdist": dist / "answer_pkg-0.1.0.tar.gz", "index": index}


def _index(folder: Path, wheel: Path, digest: str | None = None) -> str:
    """A PEP 503 simple index at `folder` serving `wheel` (whose link carries `digest`, its sha256 by default)."""
    digest = digest or hashlib.sha256(wheel.read_bytes()).hexdigest()
    write(folder, {"simple/answer-pkg/index.html": f'<a href="{wheel.as_uri()}#sha256={digest}">{wheel.name}</a>'})
    return (folder / "simple").as_uri()


def _cli(*args: str, cwd: Path | None = None, **environment: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "openenv_gym", "import", *args], capture_output=True, text=True,
                          cwd=cwd, env=os.environ | environment, timeout=110)


def test_a_wheel_imports_with_the_dependencies_its_metadata_declares_and_loads(built, tmp_path):
    done = _cli(str(built["wheel"]), "--name", "answer-wheel", "--output-dir", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert f"unpacking {WHEEL}" in done.stderr
    assert "imported answer_pkg.env:AnswerEnv (ors) as openenv/ors-answer-wheel" in done.stdout
    manifest = load_manifest(tmp_path / "answer-wheel")  # loaded in its venv as the server will: the import checked
    assert manifest.dependencies == DEPENDENCIES
    assert manifest.imported_from == str(built["wheel"])
    assert (tmp_path / "answer-wheel" / "vendor" / "answer_pkg" / "env.py").read_text() == ENV


def _as_zip(sdist: Path, folder: Path) -> Path:
    """The sdist as a .zip (as older sdists were made), the same files in it."""
    zipped = folder / sdist.name.replace(".tar.gz", ".zip")
    with tarfile.open(sdist) as tar, zipfile.ZipFile(zipped, "w") as out:
        for member in tar.getmembers():
            if member.isfile():
                out.writestr(member.name, tar.extractfile(member).read())
    return zipped


@pytest.mark.parametrize("form", ["tar.gz", "zip"])
def test_an_sdist_imports_with_the_dependencies_its_pkg_info_declares(built, tmp_path, form):
    sdist = built["sdist"] if form == "tar.gz" else _as_zip(built["sdist"], tmp_path)
    said = []
    with local_source(str(sdist), said.append) as source:
        assert 'dynamic = ["dependencies"]' in (source.path / "pyproject.toml").read_text()
        assert not (source.path / "requirements.txt").exists()
        # (unchecked: the wheel's test loads these same dependencies in their venv)
        [result] = import_environment(source.path, f"answer-{form}", tmp_path / "out", check=False,
                                      imported_from=source.origin)
    assert said == [f"unpacking {sdist.name}"]
    assert result.dependencies == DEPENDENCIES
    assert not source.path.exists()  # the unpacked package is removed after the import


@pytest.mark.parametrize("requirement", ["answer-pkg==0.1.0", "answer-pkg"])
def test_a_package_on_the_index_is_downloaded_without_its_dependencies_and_imported(built, tmp_path, requirement):
    done = _cli(requirement, "--name", "answer", "--output-dir", str(tmp_path), "--no-check",
                PIP_INDEX_URL=built["index"])
    assert done.returncode == 0, done.stderr
    assert f"downloading {requirement} with pip" in done.stderr and f"downloaded {WHEEL}" in done.stderr
    manifest = load_manifest(tmp_path / "answer")
    assert (manifest.dependencies, manifest.imported_from) == (DEPENDENCIES, requirement)


def test_a_word_that_names_a_local_folder_stays_a_path(tmp_path):
    folder = write(tmp_path / "answer-pkg", {"env.py": ENV, "requirements.txt": "\n".join(DEPENDENCIES)})
    done = _cli("answer-pkg", "--name", "local", "--output-dir", "out", "--no-check", cwd=tmp_path,
                PIP_INDEX_URL=(tmp_path / "no-index").as_uri())
    assert done.returncode == 0, done.stderr
    assert "downloading" not in done.stderr
    assert load_manifest(tmp_path / "out" / "local").imported_from == str(folder)


@pytest.mark.parametrize(("source", "index", "says"), [
    ("no-such-env-xyz==1.0", "good", r"no package no-such-env-xyz was found on the package index \(Looking in "
                                     r"indexes: file://.*\); check its name"),
    ("answer-pkg==9.9", "good", r"no release of answer-pkg==9\.9 is on the package index \(it has 0\.1\.0\); ask for "
                               r"one of those"),
    ("answer-pkg==0.1.0", "tampered", r"downloading answer-pkg==0\.1\.0 with pip failed \(exit 1\); fix what pip says"
                                     r".*DO NOT MATCH THE HASHES"),
    ("answer-pkg==0.1.0", "unreachable", r"the package index could not be reached to download answer-pkg==0\.1\.0; "
                                        r"check the network"),
    ("./dist/answer.whl", "good", r"\./dist/answer\.whl does not exist \(relative paths are read from "),
    ("answer pkg", "good", r"answer pkg does not exist, and is not a requirement either \(.*\); SOURCE is"),
    ("answer.whl", "good", r"answer\.whl does not exist \(relative paths are read from .*\); SOURCE is a \.py file, a "
                          r"folder, a wheel"),
])
def test_a_package_that_cannot_be_had_says_why_and_what_to_do(built, tmp_path, source, index, says):
    urls = {"good": built["index"], "tampered": _index(tmp_path / "tampered", built["wheel"], "0" * 64),
            "unreachable": "http://127.0.0.1:9/simple"}
    done = _cli(source, "--name", "answer", "--output-dir", str(tmp_path / "out"), "--no-check", cwd=tmp_path,
                PIP_INDEX_URL=urls[index], PIP_RETRIES="1")  # one retry: pip says why it retried, at once
    assert done.returncode == 1
    assert re.search(rf"^openenv-gym: {says}", done.stderr, re.S | re.M), done.stderr
    assert not (tmp_path / "out").exists()


def test_an_archive_without_an_environment_says_so(tmp_path):
    library = tmp_path / "helpers-1.0-py3-none-any.whl"
    with zipfile.ZipFile(library, "w") as wheel:
        wheel.writestr("helpers/__init__.py", "def add(a, b):\n    return a + b\n")
        wheel.writestr("helpers-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: helpers\nVersion: 1.0\n")
    says = r"helpers-1\.0-py3-none-any\.whl, unpacked: no environment found in .*: looked for a top-level class"
    with pytest.raises(ImportFailedError, match=says), local_source(str(library), lambda status: None) as source:
        import_environment(source.path, "helpers", tmp_path / "out", check=False)
    assert not (tmp_path / "out" / "helpers").exists()


def _tar(path: Path, member: tarfile.TarInfo, data: bytes = b"") -> Path:
    with tarfile.open(path, "w:gz") as tar:
        member.size = len(data)
        tar.addfile(member, io.BytesIO(data))
    return path


def _symlink(name: str, target: str) -> tarfile.TarInfo:
    member = tarfile.TarInfo(name)
    member.type, member.linkname = tarfile.SYMTYPE, target
    return member


@pytest.mark.parametrize(("kind", "says"), [
    ("tar-dotdot", r"'\.\./\.\./\.\./escaped\.py' would be extracted to .* outside the destination"),
    ("tar-absolute-link", r"'evil-1\.0/passwd' is a link to an absolute path"),
    ("zip-dotdot", r"'\.\./\.\./\.\./escaped\.py' would be written outside the folder it is unpacked into"),
    ("not-an-archive", r"is neither a zip archive \(\.whl, \.zip\) nor a tar archive"),
])
def test_an_archive_that_would_write_outside_its_folder_is_refused(tmp_path, kind, says):
    if kind == "tar-dotdot":
        archive = _tar(tmp_path / "evil-1.0.tar.gz", tarfile.TarInfo("../../../escaped.py"), b"x = 1\n")
    elif kind == "tar-absolute-link":
        archive = _tar(tmp_path / "evil-1.0.tar.gz", _symlink("evil-1.0/passwd", "/etc/passwd"))
    elif kind == "zip-dotdot":
        archive = tmp_path / "evil-1.0-py3-none-any.whl"
        with zipfile.ZipFile(archive, "w") as zipped:
            zipped.writestr("../../../escaped.py", "x = 1\n")
    else:
        archive = write(tmp_path, {"evil-1.0.tar.gz": "not an archive"}) / "evil-1.0.tar.gz"
    with pytest.raises(ImportFailedError, match=rf"evil-1\.0.*{says}"), local_source(str(archive), lambda status: None):
        pass
    assert not list(Path(tempfile.gettempdir()).glob("escaped.py")) and not (tmp_path / "escaped.py").exists()


@pytest.mark.parametrize(("files", "expected"), [
    # pyproject.toml lists them (not dynamic): they win over the metadata of an earlier build
    ({"pyproject.toml": '[project]\nname = "g"\nversion = "1"\ndependencies = ["openreward", "six"]\n',
      "PKG-INFO": "Metadata-Version: 2.1\nName: g\nVersion: 1\nRequires-Dist: openreward\nRequires-Dist: toolz\n"},
     ["openreward", "six"]),
    # an older setuptools' sdist: no Requires-Dist in PKG-INFO, its egg-info's requires.txt has them
    ({"PKG-INFO": "Metadata-Version: 1.0\nName: g\nVersion: 1\n",
      "g.egg-info/PKG-INFO": "Metadata-Version: 1.0\nName: g\nVersion: 1\n",
      "g.egg-info/requires.txt": 'openreward\ntoolz>=0.12\n\n[:python_version >= "3.8"]\nsix\n\n[dev]\npytest\n'},
     ["openreward", "toolz>=0.12", 'six; python_version >= "3.8"']),
    # the metadata comes before requirements.txt, which a package's metadata may not follow
    ({"g-1.dist-info/METADATA": "Metadata-Version: 2.1\nName: g\nVersion: 1\nRequires-Dist: openreward\n"
                                "Requires-Dist: xxhash; 'extra' != platform_release\n",
      "requirements.txt": "openreward\nsomething-else\n"},
     ["openreward", 'xxhash; "extra" != platform_release']),
])
def test_which_declaration_of_the_dependencies_is_read(tmp_path, files, expected):
    source = write(tmp_path / "src", {"g/__init__.py": "", "g/env.py": ENV, **files})
    [result] = import_environment(source, "g", tmp_path / "out", check=False)
    assert result.dependencies == expected

"""Virtual environments for imported environments: one per resolved dependency set, built on first use.

The venv holds openenv_gym itself and the environment's dependencies (for example `openreward`, or
`verifiers<0.4`). Venvs live in $OPENENV_GYM_VENVS (default $OPENENV_GYM_HOME/venvs):

- a venv is named by the key of a requirement list (canonicalized: names, extras and specifiers in one
  spelling and order, so lists written differently share a key); a requirement may be a path in the env's
  folder (`./vendor/x/pkg[extra]`: a package vendored with it), installed from there, the key then holding the
  hash of what the import vendored;
- it is built with uv where the uv package is installed (seconds, files linked from one shared cache), else with
  venv and pip (installer.py); the build's output goes to `logs/<key>.log` (its end is shown if the build fails),
  and a failed build leaves nothing behind;
- once built, a venv is known by what was installed in it (`pip freeze`): a requirement list that resolves to
  the packages of an existing venv shares that venv, and its own build is removed. `index.json` maps
  requirement keys and resolved sets to venvs.

`openenv-gym venvs list` shows them, with their size and the environments that use them; `openenv-gym venvs
clean` removes those no registered environment uses, and failed or abandoned builds.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from importlib.metadata import requires, version
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from openenv_gym.errors import OpenEnvGymError
from openenv_gym.manifests.discovery import PACKAGE_DIR
from openenv_gym.manifests.home import home
from openenv_gym.manifests.installer import Installer
from openenv_gym.manifests.pythons import interpreter_of
from openenv_gym.manifests.schema import BaseManifest

READY_MARKER = ".openenv-gym-ready"
INDEX_FILE = "index.json"
BUILD_TIMEOUT = 1800.0  # seconds one step of a build (creating the venv, pip install) may take
LOG_TAIL = 25  # lines of the build's log shown when it fails
LOCAL = "./"  # a requirement that starts so is a path in the env's folder


class VenvBuildError(OpenEnvGymError):
    """Installing an environment's dependencies failed (`installer`, its exit `code`, its `log` and its `tail`)."""

    def __init__(self, message: str, installer: str = "", code: int = 0, log: Path | None = None,
                 tail: str = "") -> None:
        super().__init__(message)
        self.installer, self.code, self.log, self.tail = installer, code, log, tail


def venvs_dir() -> Path:
    return Path(os.environ.get("OPENENV_GYM_VENVS") or home() / "venvs")


def needs_venv(manifest: BaseManifest) -> bool:
    return bool(manifest.dependencies or manifest.npm)


def self_requirement() -> list[str]:
    """How to install this openenv_gym: editable from a checkout, else the same released version."""
    root = PACKAGE_DIR.parent
    if (root / "pyproject.toml").is_file():
        return ["-e", str(root)]
    return [f"openenv-gym=={version('openenv-gym')}"]


def _canonical(requirement: str) -> str:
    try:
        parsed = Requirement(requirement)
    except InvalidRequirement:
        return requirement.strip()
    extras = f"[{','.join(sorted(map(canonicalize_name, parsed.extras)))}]" if parsed.extras else ""
    specifiers = ",".join(sorted(str(s) for s in parsed.specifier))
    marker = f"; {parsed.marker}" if parsed.marker else ""
    url = f" @ {parsed.url}" if parsed.url else ""
    return f"{canonicalize_name(parsed.name)}{extras}{specifiers}{url}{marker}"


def _hash(*parts: object, python: str | None = None) -> str:
    """A key of `parts`, of this openenv_gym and its own dependencies (a venv made before it needed another is made
    again), and of the venv's Python series (this interpreter's, unless given)."""
    series = python.split(".") if python else sys.version_info[:2]
    own = sorted(r for r in requires("openenv-gym") or () if "extra ==" not in r)
    return hashlib.sha256(json.dumps([*parts, self_requirement(), own, [int(n) for n in series]]).encode()
                          ).hexdigest()[:16]


def _local(requirement: str) -> bool:
    """Whether a requirement is a path in the env's folder (a package vendored with it)."""
    return requirement.startswith(LOCAL)


def installed_requirements(manifest: BaseManifest) -> list[str]:
    """The manifest's requirements as the installer takes them: a path in the env's folder made absolute."""
    return [str(manifest.folder / d) if _local(d) else d for d in manifest.dependencies]


def requirements_key(manifest: BaseManifest) -> str:
    """The key of a manifest's requirement list (and its constraints), however it was spelt."""
    key: list = sorted({_canonical(d) for d in manifest.dependencies})
    if any(map(_local, manifest.dependencies)):  # (what the paths hold: the vendored source's)
        key.append({"local": getattr(manifest, "source_hash", "")})
    if manifest.npm:
        key.append({"npm": sorted(manifest.npm)})
    if manifest.python_resolve_as:
        key.append({"resolve_as": manifest.python_resolve_as})
    parts = [key, sorted({_canonical(c) for c in manifest.constraints})] if manifest.constraints else [key]
    return _hash(*parts, python=manifest.python)


def _read_index() -> dict[str, dict[str, str]]:
    """{"requirements": {requirements key: venv}, "resolved": {hash of pip freeze: venv}}."""
    try:
        index = json.loads((venvs_dir() / INDEX_FILE).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        index = {}
    return {"requirements": index.get("requirements", {}), "resolved": index.get("resolved", {})}


def _write_index(index: dict[str, dict[str, str]]) -> None:
    """Written atomically; callers hold the index lock."""
    scratch = venvs_dir() / f"{INDEX_FILE}.{os.getpid()}"
    scratch.write_text(json.dumps(index, indent=1, sort_keys=True))
    scratch.replace(venvs_dir() / INDEX_FILE)


@contextlib.contextmanager
def _locked(name: str) -> Iterator[None]:
    venvs_dir().mkdir(parents=True, exist_ok=True)
    with open(venvs_dir() / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be building, or writing the index
        yield


def venv_path(manifest: BaseManifest) -> Path:
    """Where the manifest's venv is (before its first build: where it will be built)."""
    key = requirements_key(manifest)
    return venvs_dir() / _read_index()["requirements"].get(key, key)


def python_of(venv: Path) -> Path:
    return venv / "bin" / "python"


def in_venv(venv: Path) -> bool:
    return Path(sys.prefix).resolve() == venv.resolve()


def venv_ready(manifest: BaseManifest) -> bool:
    return (venv_path(manifest) / READY_MARKER).exists()


def ensure_venv(manifest: BaseManifest) -> Path:
    """The python of the manifest's venv, built (once, under a file lock) if needed."""
    if venv_ready(manifest):
        return python_of(venv_path(manifest))
    key = requirements_key(manifest)
    with _locked(key):
        if venv_ready(manifest):
            return python_of(venv_path(manifest))
        return python_of(_build(manifest, key))


def _build(manifest: BaseManifest, key: str) -> Path:
    venv = venvs_dir() / key
    log = venvs_dir() / "logs" / f"{key}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(venv, ignore_errors=True)  # an earlier build that was killed
    started = time.monotonic()
    installer = Installer.here()
    print(f"openenv-gym: building the virtual environment of {manifest.name} "
          f"({', '.join([*manifest.dependencies, *manifest.npm])}) with {installer.name}"
          f"{' and npm' if manifest.npm else ''}; once per dependency set, the log in {log}", file=sys.stderr,
          flush=True)
    try:
        with log.open("w") as output:
            interpreter = str(interpreter_of(manifest.python).path) if manifest.python else sys.executable
            _run(installer.create(venv, interpreter), installer, output, manifest, log)
            _install(venv, installer, output, manifest, log)
            if manifest.npm:
                _run(_npm_install(venv, manifest), installer, output, manifest, log)
        frozen = subprocess.run(installer.freeze(venv), capture_output=True, text=True, check=True,
                                env=installer.environment).stdout
        resolved = _hash(sorted(frozen.lower().splitlines()), sorted(manifest.npm), python=manifest.python)
        with _locked("index"):
            index = _read_index()
            same = index["resolved"].get(resolved)
            if same is not None and (venvs_dir() / same / READY_MARKER).exists():
                shutil.rmtree(venv)  # the same packages are installed there already: share that venv
                venv = venvs_dir() / same
            else:
                (venv / READY_MARKER).touch()
                index["resolved"][resolved] = key
            index["requirements"][key] = venv.name
            _write_index(index)
    except BaseException:
        shutil.rmtree(venv, ignore_errors=True)  # a failed build leaves nothing behind
        raise
    print(f"openenv-gym: virtual environment of {manifest.name} ready in {time.monotonic() - started:.1f} s "
          f"({venv})", file=sys.stderr, flush=True)
    return venv


def _install(venv: Path, installer: Installer, output, manifest: BaseManifest, log: Path) -> None:
    """The dependencies, at the constrained versions if they fit together, else without the constraints."""
    requirements = [*self_requirement(), *installed_requirements(manifest)]
    if manifest.constraints:
        constraints = log.with_suffix(".constraints.txt")
        constraints.write_text("\n".join(manifest.constraints) + "\n")
        try:
            _run(installer.install(venv, requirements, constraints, manifest.python_resolve_as), installer, output,
                 manifest, log)
            return
        except VenvBuildError:
            output.write(f"\nopenenv-gym: the constraints ({', '.join(manifest.constraints)}) do not fit the "
                         "requirements; installing without them\n")
            output.flush()
    _run(installer.install(venv, requirements, resolve_as=manifest.python_resolve_as), installer, output, manifest,
         log)


NPM_FOLDER = "npm"  # in a venv: its npm packages (node_modules/.bin: their commands)


def _npm_install(venv: Path, manifest: BaseManifest) -> list[str]:
    npm = shutil.which("npm")
    if npm is None:
        raise VenvBuildError(f"{manifest.name} needs npm packages ({', '.join(manifest.npm)}), and npm is not "
                             "installed: install Node.js 20 or later with npm (Debian: apt-get install nodejs npm)")
    return [npm, "install", "--prefix", str(venv / NPM_FOLDER), "--no-audit", "--no-fund", "--no-save",
            "--loglevel=error", *manifest.npm]


def npm_commands(venv: Path | None = None) -> Path | None:
    """The folder of the npm packages' commands of `venv` (default: the one this process runs in), if it has one."""
    found = (venv or Path(sys.prefix)) / NPM_FOLDER / "node_modules" / ".bin"
    return found if found.is_dir() else None


def _run(command: list[str], installer: Installer, output, manifest: BaseManifest, log: Path) -> None:
    try:
        done = subprocess.run(command, stdout=output, stderr=subprocess.STDOUT, timeout=BUILD_TIMEOUT,
                              env=installer.environment)
    except subprocess.TimeoutExpired:
        raise VenvBuildError(f"installing the dependencies of {manifest.name} took longer than {BUILD_TIMEOUT:g} s; "
                             f"check the network and the package index, and retry (the log: {log})") from None
    if done.returncode != 0:
        output.flush()
        tail = "".join(log.read_text(errors="replace").splitlines(keepends=True)[-LOG_TAIL:])
        raise VenvBuildError(
            f"installing the dependencies of {manifest.name} failed ({installer.name} exited with "
            f"{done.returncode}). The end of its log ({log}):\n{tail}\nFix the requirement in "
            f"{manifest.folder}/openenv.toml and retry", installer.name, done.returncode, log, tail)


# -- listing and cleaning ----------------------------------------------------------------------------


def _size(folder: Path) -> int:
    return sum(entry.stat(follow_symlinks=False).st_size for entry in folder.rglob("*"))


def list_venvs(manifests: list[BaseManifest]) -> list[dict]:
    """Every venv and build folder: {"name", "path", "bytes", "ready", "envs"}."""
    root = venvs_dir()
    if not root.is_dir():
        return []
    requirements = _read_index()["requirements"]
    users: dict[str, list[str]] = {}
    for manifest in manifests:
        if needs_venv(manifest):
            key = requirements_key(manifest)
            users.setdefault(requirements.get(key, key), []).append(manifest.name)
    return [{"name": folder.name, "path": str(folder), "bytes": _size(folder),
             "ready": (folder / READY_MARKER).exists(), "envs": sorted(users.get(folder.name, []))}
            for folder in sorted(root.iterdir()) if folder.is_dir() and folder.name != "logs"]


def clean_venvs(manifests: list[BaseManifest], everything: bool = False) -> list[dict]:
    """Remove the venvs no registered environment uses (every venv with `everything`), and failed builds;
    return what was removed. A build under way is left alone."""
    removed = []
    with _locked("index"):
        for entry in list_venvs(manifests):
            if entry["envs"] and entry["ready"] and not everything:
                continue
            with open(venvs_dir() / f"{entry['name']}.lock", "w") as lock:
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue  # being built right now
                shutil.rmtree(entry["path"], ignore_errors=True)
            (venvs_dir() / f"{entry['name']}.lock").unlink(missing_ok=True)
            removed.append(entry)
        gone = {entry["name"] for entry in removed}
        index = _read_index()
        _write_index({table: {key: name for key, name in entries.items() if name not in gone}
                      for table, entries in index.items()})
    return removed

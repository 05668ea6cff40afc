"""The Python interpreters this machine has, and the one an environment's venv is made with.

Most environments' venvs use the interpreter openenv_gym runs on. A kind whose projects declare the Python they need
(NeMo Gym: `>=3.12` up to 0.4, `>=3.13.14` from 0.5) gets the newest interpreter the machine has that fits it.
Where none does, but one of the same minor series does at a later patch level (3.13.0 here for `>=3.13.14`), that
one is taken and the check is relaxed: its packages are resolved as for the lowest version the project accepts.
The import says so. Anything else is refused with what to install.

Interpreters are found on PATH (`python3.N`) and among pyenv's and uv's installed versions (pyenv's shims are not
used: they fail for a version that is not the shell's own). Each is asked its version once.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from openenv_gym.errors import OpenEnvGymError

MINORS = range(8, 21)  # python3.8 ... python3.20 on PATH
_ASK_VERSION = "import sys; print('.'.join(map(str, sys.version_info[:3])))"


class NoFittingPythonError(OpenEnvGymError):
    """No interpreter of this machine fits a project's requires-python, even with its patch level relaxed."""


@dataclass(frozen=True)
class Interpreter:
    path: Path
    version: Version

    @property
    def series(self) -> str:
        return f"{self.version.major}.{self.version.minor}"


@dataclass(frozen=True)
class Choice:
    interpreter: Interpreter
    resolve_as: str | None = None  # a version the packages are resolved for, where the interpreter's is relaxed

    def note(self, project: str, requires: str) -> str | None:
        """What the import says of the choice, where it is not the plain one."""
        if self.resolve_as is None:
            return None
        return (f"{project} asks for Python {requires}, and the newest Python here is "
                f"{self.interpreter.version}; its venv uses {self.interpreter.version} ({self.interpreter.path}) "
                f"with the version check relaxed (packages resolved as for {self.resolve_as}). Install Python "
                f"{self.resolve_as} or later (pyenv install {self.interpreter.series}) to run it as it asks")


def _candidates() -> list[Path]:
    found = [Path(sys.executable)]
    found += [Path(path) for minor in MINORS if (path := shutil.which(f"python3.{minor}"))
              and "/shims/" not in path]
    roots = [Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions",
             Path(os.environ.get("UV_PYTHON_INSTALL_DIR") or Path.home() / ".local/share/uv/python")]
    for root in roots:
        if root.is_dir():
            found += sorted(path for path in root.glob("*/bin/python3") if path.is_file())
    return found


def _version_of(path: Path) -> Version | None:
    try:
        done = subprocess.run([str(path), "-c", _ASK_VERSION], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = done.stdout.strip()
    return Version(text) if done.returncode == 0 and re.fullmatch(r"\d+\.\d+\.\d+", text) else None


@cache
def interpreters() -> tuple[Interpreter, ...]:
    """Every working interpreter found, newest first (one per real executable)."""
    seen: dict[Path, Interpreter] = {}
    for path in _candidates():
        real = path.resolve()
        if real not in seen and (version := _version_of(path)) is not None:
            seen[real] = Interpreter(path, version)
    return tuple(sorted(seen.values(), key=lambda interpreter: interpreter.version, reverse=True))


def lowest_accepted(requires: SpecifierSet, series: str) -> str | None:
    """The lowest patch level of `series` (3.13) that `requires` accepts, if any does."""
    return next((f"{series}.{patch}" for patch in range(100) if Version(f"{series}.{patch}") in requires), None)


def choose(requires: str, project: str) -> Choice:
    """The interpreter for a project that declares `requires` (a requires-python specifier): the newest that fits."""
    specifier = SpecifierSet(requires)
    found = interpreters()
    fitting = [interpreter for interpreter in found if interpreter.version in specifier]
    if fitting:
        return Choice(fitting[0])
    for interpreter in found:
        resolve_as = lowest_accepted(specifier, interpreter.series)
        if resolve_as is not None:
            return Choice(interpreter, resolve_as)
    have = ", ".join(str(interpreter.version) for interpreter in found) or "none"
    raise NoFittingPythonError(f"{project} asks for Python {requires}, and no Python here fits it (found: {have}). "
                               "Install one that does (pyenv install, or uv python install) and import again")


def interpreter_of(series: str) -> Interpreter:
    """The newest interpreter of a series ("3.13"), for building a venv a manifest asks to have it."""
    for interpreter in interpreters():
        if interpreter.series == series:
            return interpreter
    raise NoFittingPythonError(f"this environment's venv needs Python {series}, and this machine has none (found: "
                               f"{', '.join(str(i.version) for i in interpreters()) or 'none'}); install Python "
                               f"{series} (pyenv install {series}) or import the environment again here")

"""What every importer finds and how the import command talks to it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from openenv_gym.errors import OpenEnvGymError


class ImportFailedError(OpenEnvGymError):
    """The source cannot be imported (nothing detected, a name taken, a module that would shadow another)."""


@dataclass(frozen=True)
class Detected:
    kind: str  # manifest kind: "ors", "verifiers", ...
    module: str  # dotted module path inside the source, e.g. "envs.counter"
    attribute: str  # class or function name
    file: Path
    sdk_modules: tuple[str, ...] = ()  # top-level SDK modules the source imports, in order of appearance

    @property
    def entry(self) -> str:
        return f"{self.module}:{self.attribute}"


class Importer(Protocol):
    kind: str
    looks_for: str  # for the "nothing found" message

    def detect(self, source: Path) -> list[Detected]: ...

    def dependencies(self, source: Path, detected: Detected) -> list[str]: ...

    def notes(self, source: Path, detected: Detected) -> list[str]:
        """Things the user should know about this source (changed pins, hazards), printed at import."""
        ...

    def manifest_fields(self, source: Path, detected: Detected) -> dict[str, str]:
        """The manifest keys of this kind beyond the common ones (an OpenEnv env's Action model, say)."""
        ...

"""What every importer finds and how the import command talks to it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from openenv_gym.errors import OpenEnvGymError

if TYPE_CHECKING:
    from openenv_gym.importers.vendor import VendorReport


class ImportFailedError(OpenEnvGymError):
    """The source cannot be imported (nothing detected, a name taken, a module that would shadow another)."""


@dataclass(frozen=True)
class Detected:
    kind: str  # manifest kind: "ors", "verifiers", ...
    module: str  # dotted module path inside the source, e.g. "envs.counter"
    attribute: str  # class or function name
    file: Path
    sdk_modules: tuple[str, ...] = ()  # top-level SDK modules the source imports, in order of appearance
    label: str | None = None  # what names it among several of one source (NAME-<label>), where not its attribute

    @property
    def entry(self) -> str:
        return f"{self.module}:{self.attribute}"


@dataclass
class ImportOptions:
    """What `openenv-gym import` was told besides the source and the name; each importer takes some (`takes`)."""

    data: list[Path] = field(default_factory=list)  # --data: files and folders copied with a source's code
    inline_sync: bool = False  # --inline-sync: an OpenEnv environment's sync methods run on the event loop
    scenarios: list[str] | None = None  # --scenario: the scenarios of an AWM dataset to import
    force: bool = False  # --force: replace an environment of that name, import modules that shadow others
    env_args: dict[str, Any] = field(default_factory=dict)  # --env-args: a Verifiers environment's arguments
    servers: list[str] | None = None  # --server: the resource servers of a NeMo Gym checkout to import
    engine: str | None = None  # --engine: the container engine that builds tasks' images (None: the first that
    # answers, "none": no engine, the image emulated over the host's root)
    say: Callable[[str], None] = lambda _: None  # progress of long work (an image's build), as it goes

    def given(self) -> set[str]:
        return {name for name, value in (("data", self.data), ("inline_sync", self.inline_sync),
                                         ("scenarios", self.scenarios), ("env_args", self.env_args),
                                         ("servers", self.servers), ("engine", self.engine)) if value}


@dataclass
class Written:
    """What an importer wrote into the environment's folder."""

    content: str  # the folder that holds it (hashed into the manifest): "vendor", "worlds"
    fields: dict[str, Any]  # the manifest's keys beyond name, kind, dependencies and provenance
    report: VendorReport
    notes: list[str]  # what the user should know (changed pins, hazards, what was skipped), printed at import
    dependencies: list[str] | None = None  # what the files written need, where only writing them finds it out


def need_note(need: str) -> str:
    """What the import says of a need it recorded."""
    return f"it needs {need}: its resets are refused until it has it"


class Importer(Protocol):
    kind: str  # manifest kind: "ors", "verifiers", ...
    looks_for: str  # for the "nothing found" message
    takes: frozenset[str]  # the ImportOptions it uses, with what each one is for (its flag's error says so)

    def detect(self, source: Path) -> list[Detected]: ...

    def dependencies(self, source: Path, detected: Detected) -> list[str]: ...

    def write(self, source: Path, detected: Detected, folder: Path, options: ImportOptions) -> Written:
        """Write the environment's files into `folder` (a staging folder that becomes the environment's)."""
        ...

    def near_miss(self, source: Path) -> str | None:
        """When nothing was detected: why a source that looks meant for this kind is not one, and what to do."""
        ...

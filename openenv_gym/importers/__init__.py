"""`openenv-gym import SOURCE --name NAME`: detect, vendor, write a manifest, record the folder.

An import writes data (a manifest and the vendored source), never generated code: the adapter of
the manifest's kind does the work at run time.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomli_w

from openenv_gym.importers.awm import AwmImporter
from openenv_gym.importers.base import Detected, Importer, ImportFailedError, ImportOptions, need_note
from openenv_gym.importers.harbor import HarborImporter
from openenv_gym.importers.loadcheck import check_loads
from openenv_gym.importers.nemo import NemoImporter
from openenv_gym.importers.openenv import OpenEnvImporter, served_from_image
from openenv_gym.importers.ors import OrsImporter
from openenv_gym.importers.scan import syntax_errors
from openenv_gym.importers.vendor import VendorReport, tree_hash
from openenv_gym.importers.verifiers import VerifiersImporter
from openenv_gym.manifests.discovery import reserved_holder
from openenv_gym.manifests.home import record_dir
from openenv_gym.manifests.schema import KINDS, MANIFEST_FILE, NAME_PATTERN, BaseManifest

# Every kind of source `openenv-gym import` reads; an AWM dataset folder, a Harbor task's, hold no code the others
# would detect.
IMPORTERS: list[Importer] = [OrsImporter(), VerifiersImporter(), OpenEnvImporter(), AwmImporter(), HarborImporter(),
                             NemoImporter()]
# What each option is for, said when a source of another kind is given it.
OPTION_USES = {"data": "--data copies data files with a source's code",
               "inline_sync": "--inline-sync is for OpenEnv environments, whose sync methods otherwise run in a thread",
               "scenarios": "--scenario picks scenarios of an AWM dataset folder (with gen_envs.jsonl)",
               "env_args": "--env-args are a Verifiers environment's arguments (load_environment's, a v1 env's config)",
               "servers": "--server picks resource servers of a NeMo Gym checkout",
               "engine": "--engine builds the images of Harbor tasks and OpenEnv projects (server/Dockerfile)"}


@dataclass
class ImportResult:
    name: str
    folder: Path
    detected: Detected
    dependencies: list[str]
    report: VendorReport
    gym_id: str
    notes: list[str]


def detect_all(source: Path) -> list[Detected]:
    return [found for importer in IMPORTERS for found in importer.detect(source)]


def _choose(found: list[Detected], env_class: str | None, source: Path, labels: list[str] | None = None
            ) -> list[Detected]:
    if not found:
        looked_for = "; or ".join(importer.looks_for for importer in IMPORTERS)
        broken = syntax_errors(source) if source.is_dir() or source.suffix == ".py" else []
        hint = f". These files are not valid Python; fix them first: {'; '.join(broken[:5])}" if broken else ""
        near = [miss for importer in IMPORTERS if (miss := importer.near_miss(source))]
        hint += "".join(f". But {miss}" for miss in near)
        raise ImportFailedError(f"no environment found in {source}: looked for {looked_for}{hint}")
    if labels:
        missing = sorted(set(labels) - {d.label for d in found})
        if missing:
            raise ImportFailedError(f"--server {', '.join(missing)}: not among the resource servers found: "
                                    f"{', '.join(sorted(str(d.label) for d in found if d.label))}")
        found = [d for d in found if d.label in labels]
    if env_class is None:
        return found
    chosen = [d for d in found if env_class in (d.attribute, d.entry)]
    if not chosen:
        names = ", ".join(d.entry for d in found)
        raise ImportFailedError(f"--class {env_class!r} is not among the environments found: {names}")
    return chosen


def _names(name: str, chosen: list[Detected]) -> list[str]:
    """One name per environment: NAME alone, or NAME-<class> when the source holds several, NAME-<module> where
    their classes or functions share a name (load_environment in two modules, say)."""
    if len(chosen) == 1:
        return [name]
    if all(d.label for d in chosen):
        return [f"{name}-{d.label}" for d in chosen]
    attributes = [d.attribute.lower() for d in chosen]
    if len(set(attributes)) == len(chosen):
        return [f"{name}-{attribute}" for attribute in attributes]
    return [f"{name}-{d.module.lower().replace('.', '_')}" for d in chosen]


def import_environment(source: Path, name: str, output_dir: Path, data: list[Path] | None = None,
                       env_class: str | None = None, force: bool = False, inline_sync: bool = False,
                       scenarios: list[str] | None = None, check: bool = True,
                       imported_from: str | None = None, env_args: dict[str, Any] | None = None,
                       servers: list[str] | None = None, engine: str | None = None,
                       say: Callable[[str], None] = lambda _: None) -> list[ImportResult]:
    """Import the environments of `source` as NAME (NAME-<class> when it holds several) under `output_dir`.
    check: load each as the server will, in its venv (built now), and fail the import if it does not load.
    env_args: a Verifiers environment's arguments, written in its manifest (and so loaded with by the check).
    imported_from: what the manifest says it came from (default: `source`; a package's name==version, say).
    servers: the resource servers of a NeMo Gym checkout to import (default: every one).
    engine: the container engine that builds Harbor tasks' images ("docker", "podman"; default the first that
    answers; "none" emulates them over the host's root). say: the progress of long work, as it goes."""
    source = source.resolve()
    if not source.exists():
        raise ImportFailedError(f"{source} does not exist; SOURCE is a .py file or a folder")
    if not NAME_PATTERN.fullmatch(name):
        raise ImportFailedError(f"--name {name!r} may only hold letters, digits, '_', '.' and '-'")
    for path in data or []:
        if not path.exists():
            raise ImportFailedError(f"--data {path} does not exist (relative paths are read from {Path.cwd()})")
    options = ImportOptions(list(data or []), inline_sync, scenarios, force, dict(env_args or {}), servers, engine, say)
    chosen = _choose(detect_all(source), env_class, source, servers)
    if env_class is None:
        chosen = served_from_image(chosen, source, engine)
    importer = {i.kind: i for i in IMPORTERS}
    for found in chosen:
        unused = sorted(options.given() - importer[found.kind].takes)
        if unused:
            raise ImportFailedError(f"{OPTION_USES[unused[0]]}; {source} is a source of kind {found.kind}")
    results = []
    for env_name, found in zip(_names(name, chosen), chosen, strict=True):
        folder = _new_folder(output_dir, env_name, force)
        gym_id = KINDS[found.kind].gym_id_of(env_name)
        holder = reserved_holder(gym_id)
        if holder is not None:
            raise ImportFailedError(f"the gym id {gym_id} is held by {holder}; choose another --name")
        if folder == source or folder in source.parents or source in folder.parents:
            raise ImportFailedError(f"the output folder {folder} must lie outside the source {source}")
        dependencies = importer[found.kind].dependencies(source, found)
        with staging(folder) as staged:
            written = importer[found.kind].write(source, found, staged, options)
            dependencies = written.dependencies if written.dependencies is not None else dependencies
            manifest = KINDS[found.kind](  # written through the schema it is read with
                name=env_name, kind=found.kind, dependencies=dependencies, imported_from=imported_from or str(source),
                folder=folder, source_hash=tree_hash(staged / written.content), **written.fields)
            _write_manifest(staged, manifest)
            found_needs = check_loads(staged) if check else []  # what `serve` would fail on fails here
            if found_needs:  # (or, where it is no fault of its code, is recorded: its resets say it)
                manifest = manifest.model_copy(update={"needs": [*getattr(manifest, "needs", []), *found_needs]})
                _write_manifest(staged, manifest)
        record_dir(output_dir)
        results.append(ImportResult(env_name, folder, found, dependencies, written.report, manifest.gym_id,
                                    [*written.notes, *map(need_note, found_needs)]))
    return results


def _new_folder(output_dir: Path, name: str, force: bool) -> Path:
    """Where an import named `name` goes; one there already is replaced only with --force."""
    folder = (output_dir / name).resolve()
    if folder.exists() and not force:
        raise ImportFailedError(f"{folder} already exists; choose another --name, or pass --force to replace it")
    return folder


def _write_manifest(staged: Path, manifest: BaseManifest) -> None:
    """The manifest, written through the schema it is read with (its kind always spelt out)."""
    (staged / MANIFEST_FILE).write_text(tomli_w.dumps(manifest.model_dump(exclude_defaults=True) | {
        "kind": manifest.kind}))


@contextmanager
def staging(folder: Path) -> Iterator[Path]:
    """A temporary folder next to `folder` that becomes `folder` (replacing it) only if the block succeeds."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    staged = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", suffix=".importing", dir=folder.parent))
    staged.chmod(0o755)  # mkdtemp's 0700 would hide the environment from the other users of a shared folder
    try:
        yield staged
        if folder.exists():
            retired = staged.with_suffix(".replaced")
            folder.rename(retired)
            staged.rename(folder)
            shutil.rmtree(retired)
        else:
            staged.rename(folder)
    finally:
        shutil.rmtree(staged, ignore_errors=True)


"""`openenv-gym import SOURCE --name NAME`: detect, vendor, write a manifest, record the folder.

An import writes data (a manifest and the vendored source), never generated code: the adapter of
the manifest's kind does the work at run time.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import tomli_w

from openenv_gym.importers.awm import AWM_DEPENDENCIES, WORLDS_DIR, import_awm, is_awm_dataset
from openenv_gym.importers.base import Detected, Importer, ImportFailedError
from openenv_gym.importers.deps import declared_description
from openenv_gym.importers.openenv import OpenEnvImporter
from openenv_gym.importers.ors import OrsImporter
from openenv_gym.importers.scan import first_docstring_line, parse, syntax_errors
from openenv_gym.importers.vendor import VendorReport, tree_hash, vendor
from openenv_gym.importers.verifiers import VerifiersImporter
from openenv_gym.manifests.home import record_dir
from openenv_gym.manifests.schema import KINDS, MANIFEST_FILE, NAME_PATTERN, VENDOR_DIR, BaseManifest
from openenv_gym.manifests.sources import top_level_modules

IMPORTERS: list[Importer] = [OrsImporter(), VerifiersImporter(), OpenEnvImporter()]
# Modules a vendored top-level module must not take the name of (besides the standard library).
RUNTIME_MODULES = {"openenv_gym", "gymnasium", "numpy", "websockets", "orjson", "pydantic", "httpx", "uvloop",
                   "tqdm", "packaging", "tomli_w", "openreward", "ors", "verifiers", "openenv"}


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


def _choose(found: list[Detected], env_class: str | None, source: Path) -> list[Detected]:
    if not found:
        looked_for = "; or ".join(importer.looks_for for importer in IMPORTERS)
        broken = syntax_errors(source)  # an environment in a file that does not parse is not seen
        hint = f". These files are not valid Python; fix them first: {'; '.join(broken[:5])}" if broken else ""
        raise ImportFailedError(f"no environment found in {source}: looked for {looked_for}{hint}")
    if env_class is None:
        return found
    chosen = [d for d in found if env_class in (d.attribute, d.entry)]
    if not chosen:
        names = ", ".join(d.entry for d in found)
        raise ImportFailedError(f"--env {env_class!r} is not among the environments found: {names}")
    return chosen


def _names(name: str, chosen: list[Detected]) -> list[str]:
    """One name per environment: NAME alone, or NAME-<class> when the source holds several."""
    if len(chosen) == 1:
        return [name]
    return [f"{name}-{d.attribute.lower()}" for d in chosen]


def _shadowed(source: Path, dependencies: list[str]) -> list[str]:
    from packaging.requirements import Requirement

    taken = set(sys.stdlib_module_names) | RUNTIME_MODULES
    taken |= {Requirement(d).name.lower().replace("-", "_") for d in dependencies}
    return sorted(top_level_modules(source) & taken)


def import_environment(source: Path, name: str, output_dir: Path, data: list[Path] | None = None,
                       env_class: str | None = None, force: bool = False, inline_sync: bool = False,
                       scenarios: list[str] | None = None) -> list[ImportResult]:
    source = source.resolve()
    if not source.exists():
        raise ImportFailedError(f"{source} does not exist; SOURCE is a .py file or a folder")
    if not NAME_PATTERN.fullmatch(name):
        raise ImportFailedError(f"--name {name!r} may only hold letters, digits, '_', '.' and '-'")
    for path in data or []:
        if not path.exists():
            raise ImportFailedError(f"--data {path} does not exist (relative paths are read from {Path.cwd()})")
    if is_awm_dataset(source):
        return [_import_awm(source, name, output_dir, scenarios, force)]
    if scenarios:
        raise ImportFailedError(f"--scenario picks scenarios of an AWM dataset folder (with gen_envs.jsonl); {source} "
                                "is not one")
    chosen = _choose(detect_all(source), env_class, source)
    if inline_sync and any(found.kind != "openenv" for found in chosen):
        raise ImportFailedError("--inline-sync is for OpenEnv environments, whose sync methods otherwise run in a "
                                "thread; this source's environments are not")
    importer = {i.kind: i for i in IMPORTERS}
    results = []
    for env_name, found in zip(_names(name, chosen), chosen, strict=True):
        folder = _new_folder(output_dir, env_name, force)
        dependencies = importer[found.kind].dependencies(source, found)
        shadowed = _shadowed(source, dependencies)
        if shadowed and not force:
            raise ImportFailedError(
                f"the source's top-level modules {', '.join(shadowed)} would shadow standard-library or dependency "
                "modules of the same name; rename them, or pass --force to import anyway")
        if folder == source or folder in source.parents or source in folder.parents:
            raise ImportFailedError(f"the output folder {folder} must lie outside the source {source}")
        with staging(folder) as staged:
            report = vendor(source, staged / VENDOR_DIR, data or [])
            manifest = KINDS[found.kind](  # written through the schema it is read with
                name=env_name, kind=found.kind, entry=found.entry, description=_description(source, found),
                source=VENDOR_DIR, dependencies=dependencies, source_hash=tree_hash(staged / VENDOR_DIR),
                imported_from=str(source), folder=folder, **importer[found.kind].manifest_fields(source, found),
                **({"inline_sync": True} if inline_sync else {}))
            _write_manifest(staged, manifest)
        record_dir(output_dir)
        results.append(ImportResult(env_name, folder, found, dependencies, report, manifest.gym_id,
                                    importer[found.kind].notes(source, found)))
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


def _import_awm(source: Path, name: str, output_dir: Path, scenarios: list[str] | None, force: bool) -> ImportResult:
    """An AWM dataset folder: its worlds (apps, template databases, verifiers) written as one environment."""
    kind = "awm"
    folder = _new_folder(output_dir, name, force)
    with staging(folder) as staged:
        imported = import_awm(source, staged, scenarios)
        tasks = sum(len(world["tasks"]) for world in imported.scenarios)
        manifest = KINDS[kind](
            name=name, kind=kind, description=f"{len(imported.scenarios)} Agent World Model scenarios, {tasks} tasks",
            dependencies=AWM_DEPENDENCIES, source_hash=tree_hash(staged / WORLDS_DIR), imported_from=str(source),
            folder=folder)
        _write_manifest(staged, manifest)
    record_dir(output_dir)
    report = VendorReport(copied=sorted(p.relative_to(folder) for p in (folder / WORLDS_DIR).rglob("*") if p.is_file()))
    notes = [f"{len(imported.scenarios)} scenarios, {tasks} tasks", *imported.problems]
    return ImportResult(name, folder, Detected(kind, WORLDS_DIR, "index", source / "gen_envs.jsonl"), AWM_DEPENDENCIES,
                        report, manifest.gym_id, notes)


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


def _description(source: Path, found: Detected) -> str:
    """What `openenv-gym list` shows: the source's declared description, else its entry's docstring."""
    tree = parse(found.file)
    return declared_description(source) or (first_docstring_line(tree, found.attribute) if tree else "")

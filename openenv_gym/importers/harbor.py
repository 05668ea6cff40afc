"""Import Harbor task packages: a task's folder (task.toml in it), or a folder of them, becomes one environment,
openenv/harbor-NAME, whose catalog is its tasks (harbor_task.py reads each one). Subfolders named as splits (train,
test, ...) that hold tasks are the catalog's splits; otherwise every task is in "train".

A task that cannot run here is refused with the key and why: alone, the import fails; in a folder, it is left out
and said, and the rest import. Written under the environment folder: tasks/<key>/ (each task's files, as given)
and tasks/index.json (each task's record, what the adapter plays).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from openenv_gym.importers.base import Detected, ImportFailedError, ImportOptions, Written
from openenv_gym.importers.harbor_engine import TaskImages
from openenv_gym.importers.harbor_task import read_task
from openenv_gym.importers.vendor import VendorReport, vendor
from openenv_gym.manifests.harbor import TaskRefusedError, file_mode, sides

TASKS_DIR = "tasks"
SPLIT_NAMES = ("train", "test", "validation", "valid", "dev", "eval")
MAX_DEPTH = 4  # folders searched below the source for task.toml files
# What the verifiers' test-time tools run on (uvx --with pytest==... --with pytest-json-ctrf==...: tools/uvx)
VERIFIER_TOOLS = ["pytest", "pytest-json-ctrf"]
EMULATED = ("the tasks' images are emulated over this machine's root (harbor_image.py): their programs run on its "
            "Python and libraries, a RUN line other than file setup, pip and apt-get of packages it has is refused, "
            "and so is an Alpine, CUDA or multi-stage image; with Docker or Podman, import with --engine")


def task_folders(source: Path) -> list[Path]:
    """Every task package at or below `source` (not inside another task's folder)."""
    if (source / "task.toml").is_file():
        return [source]
    found: list[Path] = []
    for root, folders, files in os.walk(source):
        depth = len(Path(root).relative_to(source).parts)
        if "task.toml" in files and depth:
            found.append(Path(root))
            folders.clear()
        elif depth >= MAX_DEPTH:
            folders.clear()
        folders[:] = sorted(folder for folder in folders if not folder.startswith("."))
    return found


def split_of(source: Path, folder: Path) -> str:
    parts = folder.relative_to(source).parts
    return parts[0] if len(parts) > 1 and parts[0] in SPLIT_NAMES else "train"


class HarborImporter:
    kind = "harbor"
    looks_for = "a Harbor task package (a folder with task.toml), or a folder of them"
    takes: frozenset[str] = frozenset({"engine"})

    def detect(self, source: Path) -> list[Detected]:
        if source.is_dir() and task_folders(source):
            return [Detected(self.kind, TASKS_DIR, "index", source / "task.toml")]
        return []

    def dependencies(self, source: Path, detected: Detected) -> list[str]:
        return list(VERIFIER_TOOLS)  # (and what emulated images pip-install: found as they are written)

    def near_miss(self, source: Path) -> str | None:
        if source.is_dir() and ((source / "task.yaml").is_file() or any(source.glob("*/task.yaml"))):
            return ("this is Terminal-Bench 1's format (task.yaml, run-tests.sh), not Harbor's: convert it with "
                    "Harbor's mapper (harbor tasks migrate) and import the result")
        return None

    def write(self, source: Path, detected: Detected, folder: Path, options: ImportOptions) -> Written:
        single = (source / "task.toml").is_file()
        index, notes, report = [], [], VendorReport()
        keys: set[str] = set()
        packages = dict.fromkeys(VERIFIER_TOOLS)
        try:
            images = TaskImages.chosen(options.engine, options.say)
        except TaskRefusedError as exc:
            raise ImportFailedError(str(exc)) from None
        for task_folder in task_folders(source):
            where = task_folder.relative_to(source).as_posix() if not single else task_folder.name
            try:
                record = read_task(task_folder, images)
            except TaskRefusedError as exc:
                if single:
                    raise ImportFailedError(f"{source}: {exc}") from None
                notes.append(f"{where}: left out: {exc}")
                continue
            key = _unique(task_folder.name, keys)
            copied = vendor(task_folder, folder / TASKS_DIR / key)
            notes += [f"{where}: {note}" for note in _vendor_copied_files(record, task_folder, folder / TASKS_DIR /
                                                                          key, copied)]
            report.copied += [Path(TASKS_DIR, key, path) for path in copied.copied]
            report.left_out += copied.left_out
            report.total_bytes += copied.total_bytes
            for side in sides(record):
                _show(side, folder / TASKS_DIR / key, key)
                packages.update(dict.fromkeys(side.pop("packages")))
            notes += [f"{where}: {note}" for side in sides(record) for note in side.pop("notes")]
            index.append({"key": key, "id": where if not single else record["name"], "split": split_of(source,
                                                                                                    task_folder),
                          **record})
        if not index:
            raise ImportFailedError(f"no task of {source} can run here: " + "; ".join(notes[:10]))
        (folder / TASKS_DIR).mkdir(parents=True, exist_ok=True)
        (folder / TASKS_DIR / "index.json").write_text(json.dumps(index, indent=1))
        count = f"{len(index)} Harbor task{'s' if len(index) > 1 else ''}"
        if images is None:
            notes.append(EMULATED if options.engine == "none" else f"no container engine answers here: {EMULATED}")
        fields = {"description": f"Harbor: {count}"} | ({"engine": images.engine.name} if images else {})
        return Written(TASKS_DIR, fields, report, [count, *notes], _without_bare_repeats(list(packages)))


def _without_bare_repeats(requirements: list[str]) -> list[str]:
    """The requirements less a bare name that another one says more of ("pandas" beside "pandas==2.3.2": tasks'
    images pin their test tools, and their RUN lines install them again without)."""
    named = {}
    for requirement in requirements:
        try:
            named[requirement] = canonicalize_name(Requirement(requirement).name)
        except InvalidRequirement:
            named[requirement] = None
    said_more = {name for requirement, name in named.items() if name and requirement.strip() != name and
                 requirement.strip().lower().replace("_", "-") != name}
    return [requirement for requirement, name in named.items()
            if not (name in said_more and requirement.strip().lower().replace("_", "-") == name)]


def _vendor_copied_files(record: dict[str, Any], task_folder: Path, vendored: Path, report: VendorReport) \
        -> list[str]:
    """Copy the files the task's Dockerfiles copy that vendoring left out, however they look (a .so to inspect, a
    fake credentials file, a build/ folder): they are the task's own. What was done, as notes."""
    wanted = sorted({f"{side['context']}/{source}" for side in sides(record)
                     for source, _ in (*side["image"]["copies"], *side["shown"])})
    notes = []
    for path in wanted:
        if (vendored / path).exists() or not (task_folder / path).is_file():
            continue
        (vendored / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(task_folder / path, vendored / path, follow_symlinks=False)
        report.copied.append(Path(path))
        why = next((why for left, why in report.left_out if Path(path) == Path(left) or Path(left) in
                    Path(path).parents), "was left out")
        report.left_out = [(left, reason) for left, reason in report.left_out if Path(left) != Path(path)]
        notes.append(f"{path} copied though it {why}: its Dockerfile copies it")
    return notes


def _show(side: dict[str, Any], vendored: Path, key: str) -> None:
    """The files a container shows at its root, their modes given (chmod in the Dockerfile), as paths in the
    environment's folder (what the sandbox binds)."""
    for source_file, inside in side.pop("shown"):
        mode = side["image"]["modes"].get(inside)
        shown = vendored / side["context"] / source_file
        if mode is not None:
            shown.chmod(file_mode(mode, shown.stat().st_mode))
        side.setdefault("show", []).append([f"{key}/{side['context']}/{source_file}", inside])


def _unique(name: str, taken: set[str]) -> str:
    key, number = name, 1
    while key in taken:
        number += 1
        key = f"{name}-{number}"
    taken.add(key)
    return key


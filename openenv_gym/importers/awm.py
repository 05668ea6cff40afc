"""Import Agent World Model's tool worlds: a folder of AWM's published JSONL files (the dataset
Snowflake/AgentWorldModel-1K, CC-BY-4.0) becomes one environment, openenv/awm-NAME.

    gen_scenario.jsonl          {"name", "description"}
    gen_tasks.jsonl             {"scenario", "tasks": [str, ...]}
    gen_db.jsonl                {"scenario", "db_schema": {"tables": [{"name", "ddl", "indexes": [...]}]}}
    gen_sample.jsonl            {"scenario", "sample_data": {"tables": [{"table_name", "insert_statements"}]}}
    gen_envs.jsonl              {"scenario", "db_path", "full_code"}: one FastAPI app per scenario
    gen_verifier.pure_code.jsonl / gen_verifier.jsonl
                                {"scenario", "task_idx", "task", "verification": {"code", "raw_response"}}

Rows are matched by the scenario's normalised name, as AWM's readers match them, and a verifier's mode is the
function its code defines (awm_rows.py). Nothing runs at import but SQL: each scenario's template database is
built once here, from its DDL and its INSERTs, a statement that fails skipped as AWM skips it
(awm_database.py). The app's code and the verifiers are only parsed (a syntax error skips the scenario, or the
task). A malformed row, a second row for a scenario's part, a scenario with a missing part, a failed statement
and a task without a verifier are reported (file, line, scenario) and skipped; the rest import. Written under
the environment folder: worlds/index.json and, per scenario, app.py, template.db and the verifiers (code mode:
verify_<task>.py; SQL mode: verify_<task>.sql.py).
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from openenv_gym.importers.awm_database import build_template
from openenv_gym.importers.awm_rows import FILES, VERIFIER_FILES, World, read_worlds
from openenv_gym.importers.base import Detected, ImportFailedError, ImportOptions, Written
from openenv_gym.importers.vendor import VendorReport
from openenv_gym.manifests.awm_names import scenario_key
from openenv_gym.runtime.pyparse import parse as parse_python

WORLDS_DIR = "worlds"
# what the generated apps import (uvicorn only for their __main__ block) and what serves them in process
AWM_DEPENDENCIES = ["fastapi>=0.110", "sqlalchemy>=2.0", "pydantic>=2", "httpx>=0.27", "uvicorn>=0.24"]


def is_awm_dataset(source: Path) -> bool:
    return source.is_dir() and (source / "gen_envs.jsonl").is_file()


@dataclass
class AwmImport:
    scenarios: list[dict[str, Any]]  # {"name", "description", "tasks": [{"task", "verifiers": [modes]}]}
    problems: list[str]  # what was skipped, and why


def write_worlds(worlds: dict[str, World], folder: Path, problems: list[str]) -> list[dict[str, Any]]:
    """Write each complete scenario under folder/worlds; return the index of what was written."""
    index: list[dict[str, Any]] = []
    for world in tqdm(sorted(worlds.values(), key=lambda w: w.name), desc="building AWM worlds", unit="world",
                      leave=False, disable=len(worlds) < 50):
        missing = [part for part in ("tasks", "db_schema", "sample_data", "full_code") if getattr(world, part) is None]
        if missing:
            problems.append(f"scenario {world.name}: no {', '.join(missing)}; skipped")
            continue
        assert world.full_code is not None and world.tasks is not None
        assert world.db_schema is not None and world.sample_data is not None
        try:
            parse_python(world.full_code)
        except SyntaxError as exc:
            problems.append(f"gen_envs.jsonl, scenario {world.name}: its code does not parse (line {exc.lineno}: "
                            f"{exc.msg}); skipped")
            continue
        target = folder / WORLDS_DIR / world.name
        target.mkdir(parents=True)
        try:
            build_template(world.db_schema, world.sample_data, target / "template.db", world.name, problems)
        except sqlite3.Error as exc:  # the database itself failed (a full disk, say), not a statement of it
            problems.append(f"gen_db/gen_sample, scenario {world.name}: building its database failed "
                            f"({type(exc).__name__}: {exc}); skipped")
            continue
        (target / "app.py").write_text(world.full_code)
        tasks = []
        for number, task in enumerate(world.tasks):
            modes = sorted(world.verifiers.get(number, {}))
            if not modes:
                problems.append(f"scenario {world.name}, task {number}: no verifier; skipped")
                continue
            for mode in modes:
                suffix = ".py" if mode == "code" else ".sql.py"
                (target / f"verify_{number}{suffix}").write_text(world.verifiers[number][mode])
            tasks.append({"index": number, "task": str(task), "verifiers": modes})
        index.append({"name": world.name, "description": world.description, "tasks": tasks})
    (folder / WORLDS_DIR).mkdir(parents=True, exist_ok=True)
    (folder / WORLDS_DIR / "index.json").write_text(json.dumps(index))
    return index


def import_awm(source: Path, folder: Path, scenarios: list[str] | None) -> AwmImport:
    """Read the dataset at `source` and write its worlds under `folder` (a staging folder)."""
    problems: list[str] = []
    wanted = {scenario_key(name): name for name in scenarios} if scenarios else None
    worlds = read_worlds(source, set(wanted) if wanted is not None else None, problems)
    if wanted is not None and set(wanted) - set(worlds):
        raise ImportFailedError(f"--scenario {', '.join(sorted(wanted[k] for k in set(wanted) - set(worlds)))}: "
                                f"not in {source}")
    index = write_worlds(worlds, folder, problems)
    if not any(world["tasks"] for world in index):
        raise ImportFailedError(f"no scenario of {source} could be imported: " + "; ".join(problems[:10]))
    return AwmImport(index, problems)


class AwmImporter:
    """A folder of AWM's JSONL files (gen_envs.jsonl among them) as one environment of all its worlds."""

    kind = "awm"
    looks_for = "an Agent World Model dataset folder (gen_envs.jsonl, gen_tasks.jsonl, gen_db.jsonl, ...)"
    takes = frozenset({"scenarios"})

    def detect(self, source: Path) -> list[Detected]:
        return [Detected(self.kind, WORLDS_DIR, "index", source / "gen_envs.jsonl")] if is_awm_dataset(source) else []

    def dependencies(self, source: Path, detected: Detected) -> list[str]:
        return AWM_DEPENDENCIES

    def near_miss(self, source: Path) -> str | None:
        if not source.is_dir():
            return None
        if (source / "awm" / "core" / "server.py").is_file():
            return ("this is Agent World Model's repository, its synthesis pipeline, which holds no worlds: download "
                    "its dataset (hf download Snowflake/AgentWorldModel-1K --repo-type dataset --local-dir awm) and "
                    "import that folder")
        present = sorted(path.name for path in source.glob("gen_*.jsonl"))
        if present:
            files = ", ".join(f"{name}.jsonl" for name in (*FILES, *VERIFIER_FILES.values()))
            return (f"this looks like part of an AWM dataset ({', '.join(present)}) without gen_envs.jsonl, the "
                    f"worlds' apps; an AWM source is a folder of its JSONL files: {files}")
        return None

    def write(self, source: Path, detected: Detected, folder: Path, options: ImportOptions) -> Written:
        imported = import_awm(source, folder, options.scenarios)
        tasks = sum(len(world["tasks"]) for world in imported.scenarios)
        report = VendorReport(copied=sorted(p.relative_to(folder) for p in (folder / WORLDS_DIR).rglob("*")
                                            if p.is_file()))
        counts = f"{len(imported.scenarios)} scenarios, {tasks} tasks"
        return Written(WORLDS_DIR, {"description": f"Agent World Model: {counts}"}, report,
                       [counts, *imported.problems])

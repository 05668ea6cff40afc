"""Tool worlds written to Agent World Model's code rules (SQLAlchemy declarative models, create_engine from
DATABASE_PATH, async handlers, user_id = 1, unique snake_case operation_ids, pydantic response models), and
`write_dataset`, which lays them out as AWM's published JSONL files: the dataset's hub cannot be reached here.

Each world is a folder: app.py (gen_envs' full_code), world.json (description, tasks, db_schema, sample_data),
verify_<task index>.py (gen_verifier.pure_code's code-mode verifiers; a task without one has no verifier) and
verify_<task index>.sql.py (gen_verifier's SQL-mode ones, whose facts an LLM judge reads).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

WORLDS = Path(__file__).parent
SCENARIOS = ("bookstore_1", "todo_list_2")


def write_dataset(folder: Path, scenarios: tuple[str, ...] = SCENARIOS) -> Path:
    """AWM's JSONL files for `scenarios` in `folder`; returns folder."""
    folder.mkdir(parents=True, exist_ok=True)
    rows: dict[str, list[dict]] = {name: [] for name in (
        "gen_scenario", "gen_tasks", "gen_db", "gen_sample", "gen_envs", "gen_verifier.pure_code", "gen_verifier")}
    for scenario in scenarios:
        world = json.loads((WORLDS / scenario / "world.json").read_text())
        rows["gen_scenario"].append({"name": scenario, "description": world["description"]})
        rows["gen_tasks"].append({"scenario": scenario, "tasks": world["tasks"]})
        rows["gen_db"].append({"scenario": scenario, "db_schema": world["db_schema"]})
        rows["gen_sample"].append({"scenario": scenario, "sample_data": world["sample_data"]})
        rows["gen_envs"].append({"scenario": scenario, "db_path": f"{scenario}.db",
                                 "full_code": (WORLDS / scenario / "app.py").read_text()})
        for index, task in enumerate(world["tasks"]):
            for suffix, file in ((".py", "gen_verifier.pure_code"), (".sql.py", "gen_verifier")):
                verifier = WORLDS / scenario / f"verify_{index}{suffix}"
                if verifier.exists():
                    rows[file].append({"scenario": scenario, "task_idx": index, "task": task,
                                       "verification": {"code": verifier.read_text(), "raw_response": ""}})
    for name, entries in rows.items():
        (folder / f"{name}.jsonl").write_text("".join(json.dumps(row) + "\n" for row in entries))
    return folder


def scratch_dataset() -> Path:
    """The dataset in a new temporary folder (for the venv builder, which imports a source before the tests)."""
    return write_dataset(Path(tempfile.mkdtemp(prefix="awm-dataset-")))

"""Tool worlds written to Agent World Model's code rules (SQLAlchemy declarative models, create_engine from
DATABASE_PATH, async handlers, user_id = 1, unique snake_case operation_ids, pydantic response models), and
`write_dataset`, which lays them out as AWM's published JSONL files: the dataset's hub cannot be reached here.

Each world is a folder: app.py (gen_envs' full_code), world.json (description, tasks, db_schema, sample_data),
verify_<task index>.py (gen_verifier.pure_code's code-mode verifiers; a task without one has no verifier) and
verify_<task index>.sql.py (gen_verifier's SQL-mode ones, whose facts an LLM judge reads).

library_loans/ is one world in the styles AWM's generator emits, one scenario each (STYLES): how `create_engine`
reads DATABASE_PATH (a URL in the variable, a path in it, a literal URL ignoring it, an engine made in a helper
function under another name), `from __future__ import annotations` or not, request models named `request`,
`body`, `payload` or `data`, models defined before and after the ones that use them, sessions opened by hand or
through a `Depends(get_db)`. `awm_server_code` gives any of them as AWM's runner does.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

WORLDS = Path(__file__).parent
SCENARIOS = ("bookstore_1", "todo_list_2")
STYLES = {"library_loans_7": "app_url_in_variable.py", "library_loans_8": "app_path_in_variable.py",
          "library_loans_9": "app_literal_url.py", "library_loans_10": "app_engine_from_helper.py"}


def world_files(scenario: str) -> tuple[Path, Path]:
    """(its folder of world.json and verifiers, its app's code) of a scenario."""
    if scenario in STYLES:
        return WORLDS / "library_loans", WORLDS / "library_loans" / STYLES[scenario]
    return WORLDS / scenario, WORLDS / scenario / "app.py"


def awm_server_code(code: str, database: Path) -> str:
    """A world's code as AWM's runner serves it (its documented rule): every line that calls `create_engine(` is
    replaced by an engine on the episode's SQLite file, whatever it said."""
    lines = []
    for line in code.split("\n"):
        if "create_engine(" in line:
            left = line.split("create_engine(")[0]
            line = f"{left}create_engine('sqlite:///{database}', connect_args={{'check_same_thread': False}})"
        lines.append(line)
    return "\n".join(lines)


def write_dataset(folder: Path, scenarios: tuple[str, ...] = SCENARIOS) -> Path:
    """AWM's JSONL files for `scenarios` in `folder`; returns folder."""
    folder.mkdir(parents=True, exist_ok=True)
    rows: dict[str, list[dict]] = {name: [] for name in (
        "gen_scenario", "gen_tasks", "gen_db", "gen_sample", "gen_envs", "gen_verifier.pure_code", "gen_verifier")}
    for scenario in scenarios:
        folder_of, app = world_files(scenario)
        world = json.loads((folder_of / "world.json").read_text())
        rows["gen_scenario"].append({"name": scenario, "description": world["description"]})
        rows["gen_tasks"].append({"scenario": scenario, "tasks": world["tasks"]})
        rows["gen_db"].append({"scenario": scenario, "db_schema": world["db_schema"]})
        rows["gen_sample"].append({"scenario": scenario, "sample_data": world["sample_data"]})
        rows["gen_envs"].append({"scenario": scenario, "db_path": f"{scenario}.db",
                                 "full_code": app.read_text()})
        for index, task in enumerate(world["tasks"]):
            for suffix, file in ((".py", "gen_verifier.pure_code"), (".sql.py", "gen_verifier")):
                verifier = folder_of / f"verify_{index}{suffix}"
                if verifier.exists():
                    rows[file].append({"scenario": scenario, "task_idx": index, "task": task,
                                       "verification": {"code": verifier.read_text(), "raw_response": ""}})
    for name, entries in rows.items():
        (folder / f"{name}.jsonl").write_text("".join(json.dumps(row) + "\n" for row in entries))
    return folder


def scratch_dataset() -> Path:
    """The dataset in a new temporary folder (for the venv builder, which imports a source before the tests)."""
    return write_dataset(Path(tempfile.mkdtemp(prefix="awm-dataset-")))

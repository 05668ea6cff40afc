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

`write_pipeline_dataset` lays the worlds out as AWM's own pipeline writes them (`awm gen all`): display names in
every file but gen_verifier.jsonl, which holds normalised names and, whatever the mode, the verifiers (here
code-mode ones, one declaring its arguments under other names); and sample data of which some statements fail
(a table whose DDL does not parse, a duplicate key, a foreign key to nothing), as LLM-written data does.
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


# AWM's verdicts as OpenEnv's port of AWM scores them (AWM itself gives no numbers): complete, else incomplete
AWM_REWARDS = {"complete": 1.0, "others": 0.1}


def awm_verdict(code: str, initial: Path, final: Path, final_answer: str) -> str:
    """A code-mode verifier's result as AWM's verify.py gets it: the code run by exec in a namespace of sqlite3,
    json, os and re, its verify_task_completion called with both databases made read-only."""
    import os
    import re
    import sqlite3

    namespace = {"sqlite3": sqlite3, "json": json, "os": os, "re": re}
    exec(code, namespace)  # (the fixture's own verifier, as AWM runs its dataset's)
    for database in (initial, final):
        database.chmod(0o444)
    return namespace["verify_task_completion"](str(initial), str(final), final_answer)["result"]


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


# scenario -> (its display name in AWM's pipeline output, that name as AWM normalises it)
PIPELINE_NAMES = {"bookstore_1": ("Book Store (1)", "book_store_1"), "todo_list_2": ("TodoList #2", "todolist_2")}
FAILING_SQL = {  # bookstore_1's statements that fail, table -> statements; wishlist's DDL lacks its last ")"
    "wishlist": ["INSERT INTO wishlist (id, book_id) VALUES (1, 2)"],
    "books": ["INSERT INTO books (id, title, author, price, stock) VALUES (1, 'Dune', 'Frank Herbert', 1.0, 99)"],
    "orders": ["INSERT INTO orders (id, user_id, book_id, quantity, status) VALUES (3, 1, 42, 1, 'pending')"]}


def write_pipeline_dataset(folder: Path) -> Path:
    """The worlds of SCENARIOS as AWM's pipeline writes them (see above); returns folder."""
    write_dataset(folder)
    for part in ("gen_scenario", "gen_tasks", "gen_db", "gen_sample", "gen_envs"):
        key = "name" if part == "gen_scenario" else "scenario"
        rows = [json.loads(line) for line in (folder / f"{part}.jsonl").read_text().splitlines()]
        for row in rows:
            row[key] = PIPELINE_NAMES[row[key]][0]
            if part == "gen_db" and row[key] == "Book Store (1)":
                row["db_schema"]["tables"].insert(0, {"name": "wishlist", "indexes": [], "ddl": (
                    "CREATE TABLE wishlist (id INTEGER PRIMARY KEY, book_id INTEGER REFERENCES books(id)")})
            if part == "gen_sample" and row[key] == "Book Store (1)":
                tables = row["sample_data"]["tables"]
                tables.insert(0, {"table_name": "wishlist", "insert_statements": FAILING_SQL["wishlist"]})
                for table in tables[1:]:
                    table["insert_statements"] += FAILING_SQL.get(table["table_name"], [])
        (folder / f"{part}.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    verifiers = [json.loads(line) for line in (folder / "gen_verifier.pure_code.jsonl").read_text().splitlines()]
    for row in verifiers:
        row["scenario"] = PIPELINE_NAMES[row["scenario"]][1]
        if (row["scenario"], row["task_idx"]) == ("todolist_2", 1):  # its arguments by position (AWM allows it)
            code = row["verification"]["code"]
            for name, other in (("initial_db_path", "before"), ("final_db_path", "after"), ("final_answer", "said")):
                code = code.replace(name, other)
            row["verification"]["code"] = code
    (folder / "gen_verifier.jsonl").write_text("".join(json.dumps(row) + "\n" for row in verifiers))
    (folder / "gen_verifier.pure_code.jsonl").unlink()
    return folder


def scratch_dataset() -> Path:
    """The dataset in a new temporary folder (for the venv builder, which imports a source before the tests)."""
    return write_dataset(Path(tempfile.mkdtemp(prefix="awm-dataset-")))

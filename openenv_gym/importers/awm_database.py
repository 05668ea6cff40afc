"""A scenario's template database, built from its DDL and INSERTs as AWM's `reset_single_database` builds it:
whatever fails is skipped and reported, never the scenario.

- Tables (gen_db's `db_schema.tables`): each table's DDL, then its indexes and `examples`, in order; the first of
  them that fails skips the rest of that table's (the tables before and after it are built).
- Sample data (gen_sample's `sample_data.tables[].insert_statements`): every INSERT on its own, with foreign keys
  enforced (AWM turns them on for this step); one that fails is skipped and the others stay.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

SHOWN_ERRORS = 3  # distinct INSERT errors quoted in a scenario's note
# what one statement can fail with: SQLite's errors, and a statement that is not a string (or holds a NUL)
STATEMENT_FAILURES = (sqlite3.Error, sqlite3.Warning, TypeError, ValueError)


def _tables(part: Any, key: str) -> list[Any]:
    tables = part.get(key) if isinstance(part, dict) else None
    return tables if isinstance(tables, list) else []


def _strings(table: Any, key: str) -> list[Any]:
    values = table.get(key) if isinstance(table, dict) else None
    return values if isinstance(values, list) else []


def _create_tables(db: sqlite3.Connection, db_schema: dict, scenario: str, problems: list[str]) -> None:
    for number, table in enumerate(_tables(db_schema, "tables")):
        name = table.get("name", f"#{number}") if isinstance(table, dict) else f"#{number}"
        statements = [table.get("ddl") if isinstance(table, dict) else None,
                      *_strings(table, "indexes"), *_strings(table, "examples")]
        for statement in statements:
            try:
                db.execute(statement)
            except STATEMENT_FAILURES as exc:
                problems.append(f"gen_db.jsonl, scenario {scenario}, table {name}: {type(exc).__name__}: "
                                f"{str(exc)[:300]}; this and the table's statements after it skipped")
                break


def _insert_samples(db: sqlite3.Connection, sample_data: dict, scenario: str, problems: list[str]) -> None:
    total, errors = 0, []
    for table in _tables(sample_data, "tables"):
        name = table.get("table_name", "?") if isinstance(table, dict) else "?"
        for statement in _strings(table, "insert_statements"):
            total += 1
            try:
                db.execute(statement)
            except STATEMENT_FAILURES as exc:
                errors.append(f"table {name}: {type(exc).__name__}: {str(exc)[:200]}")
    if errors:
        shown = list(dict.fromkeys(errors))[:SHOWN_ERRORS]
        problems.append(f"gen_sample.jsonl, scenario {scenario}: {len(errors)} of {total} INSERTs failed and were "
                        f"skipped ({'; '.join(shown)}{'; ...' if len(set(errors)) > len(shown) else ''})")


def build_template(db_schema: dict, sample_data: dict, path: Path, scenario: str, problems: list[str]) -> None:
    """Write the template database at `path`; what failed goes to `problems` (file, scenario, table, error)."""
    db = sqlite3.connect(path, isolation_level=None)  # transactions are ours: one per step
    try:
        db.execute("BEGIN")
        _create_tables(db, db_schema, scenario, problems)
        _commit(db)
        db.execute("PRAGMA foreign_keys = ON")  # outside a transaction, where SQLite honours it
        db.execute("BEGIN")
        _insert_samples(db, sample_data, scenario, problems)
        _commit(db)
    finally:
        db.close()


def _commit(db: sqlite3.Connection) -> None:
    if db.in_transaction:  # a statement of the data may have ended it ("COMMIT;"), as AWM's commit allows
        db.execute("COMMIT")

"""What an AWM dataset's JSONL files say of each scenario (importers/awm.py writes it).

As AWM's own readers do, rows are matched by the scenario's normalised name (`find_scenario_entry`): AWM's
pipeline writes display names (`GoFundMe`) in every file but the verifiers' (`gofundme`), the published dataset
normalised ones throughout; a world is named by its normalised name. A verifier's mode is the function its code
defines (verify_task_completion: code, verify_task: sql), whichever file holds it: AWM's pipeline writes
gen_verifier.jsonl in both modes. A malformed row, a second row for a scenario's part and a verifier that does
not parse are reported (file, line) and skipped.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openenv_gym.importers.base import ImportFailedError
from openenv_gym.manifests.awm_names import scenario_key
from openenv_gym.runtime.pyparse import parse as parse_python

FILES = ("gen_scenario", "gen_tasks", "gen_db", "gen_sample", "gen_envs")
VERIFIER_FILES = {"code": "gen_verifier.pure_code", "sql": "gen_verifier"}  # mode -> file
VERIFIER_MODES = {"verify_task_completion": "code", "verify_task": "sql"}  # the function a verifier defines -> mode


def verifier_mode(code: str, file_mode: str) -> str | None:
    """code or sql: the first of AWM's two verifier functions the code defines, else (another verify_ function,
    which AWM's verify.py calls in the mode it was asked for) the file's mode; None if it defines no verify_
    function. Raises SyntaxError."""
    functions = sorted((node for node in ast.walk(parse_python(code)) if isinstance(node, ast.FunctionDef)
                        and node.name.startswith("verify_")), key=lambda node: node.lineno)
    if not functions:
        return None
    return next((VERIFIER_MODES[f.name] for f in functions if f.name in VERIFIER_MODES), file_mode)


@dataclass
class World:
    """What the files say of one scenario."""

    name: str  # normalised
    display: str = ""  # a name the files give it that normalises to `name`, when they do not give `name` itself
    description: str = ""
    tasks: list[str] | None = None
    db_schema: dict | None = None
    sample_data: dict | None = None
    full_code: str | None = None
    verifiers: dict[int, dict[str, str]] = field(default_factory=dict)  # task index -> {mode: code}
    rows: dict[str, str] = field(default_factory=dict)  # part -> where its row is (a second one is skipped)


def _rows(path: Path, problems: list[str]) -> Iterator[tuple[int, dict]]:
    """The JSON objects of a JSONL file, streamed; a line that is not one is reported and skipped."""
    with path.open(encoding="utf-8", errors="replace") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                problems.append(f"{path.name}, line {number}: not JSON ({exc.msg}); skipped")
                continue
            if not isinstance(row, dict):
                problems.append(f"{path.name}, line {number}: not a JSON object; skipped")
                continue
            yield number, row


def _field(row: dict, key: str, kind: type, where: str, problems: list[str]) -> Any:
    value = row.get(key)
    if not isinstance(value, kind):
        problems.append(f"{where}: field {key!r} missing or not a {kind.__name__}; skipped")
        return None
    return value


class _Reader:
    """The scenarios of a dataset's files (or only the wanted ones), as far as their rows are well formed."""

    PARTS = {"gen_tasks": ("tasks", list), "gen_db": ("db_schema", dict), "gen_sample": ("sample_data", dict),
             "gen_envs": ("full_code", str)}

    def __init__(self, wanted: set[str] | None, problems: list[str]) -> None:
        self.wanted, self.problems = wanted, problems
        self.worlds: dict[str, World] = {}

    def world(self, row: dict, key: str, where: str, part: str) -> World | None:
        """The scenario a row is of, by its normalised name; None if it is not wanted or the row says again a
        part an earlier row gave (the first is kept, as AWM's find_scenario_entry finds it)."""
        raw = _field(row, key, str, where, self.problems)
        if raw is None:
            return None
        name = scenario_key(raw)
        if not name:
            self.problems.append(f"{where}: scenario {raw!r} has no letter or digit to name it by; skipped")
            return None
        if self.wanted is not None and name not in self.wanted:
            return None
        found = self.worlds.setdefault(name, World(name))
        if raw != name and not found.display:
            found.display = raw
        if part in found.rows:
            named = name if raw == name else f"{raw!r} ({name})"
            self.problems.append(f"{where}: scenario {named} has its {part} at {found.rows[part]} already; skipped")
            return None
        found.rows[part] = where
        return found

    def read_parts(self, source: Path, stem: str) -> None:
        path = source / f"{stem}.jsonl"
        for number, row in _rows(path, self.problems):
            where = f"{path.name}, line {number}"
            if stem == "gen_scenario":
                found = self.world(row, "name", where, "description")
                if found is not None and isinstance(row.get("description"), str):
                    found.description = row["description"]
                continue
            key, kind = self.PARTS[stem]
            found = self.world(row, "scenario", where, key)
            value = None if found is None else _field(row, key, kind, f"{where} (scenario {found.name})",
                                                      self.problems)
            if value is not None:
                setattr(found, key, value)

    def read_verifiers(self, path: Path, file_mode: str) -> None:
        moved = 0  # verifiers of the other mode than the file's name says
        for number, row in _rows(path, self.problems):
            where = f"{path.name}, line {number}"
            code = (row.get("verification") or {}).get("code") if isinstance(row.get("verification"), dict) else None
            task_idx = row.get("task_idx")
            if self.wanted is not None and isinstance(row.get("scenario"), str) and \
                    scenario_key(row["scenario"]) not in self.wanted:
                continue  # not parsed, nor reported
            if type(task_idx) is not int or not isinstance(code, str):
                self.problems.append(f"{where}: needs an integer task_idx and verification.code; skipped")
                continue
            try:
                mode = verifier_mode(code, file_mode)
            except SyntaxError as exc:
                self.problems.append(f"{where}: the verifier of task {task_idx} does not parse (line {exc.lineno}: "
                                     f"{exc.msg}); skipped")
                continue
            if mode is None:
                self.problems.append(f"{where}: the verifier of task {task_idx} defines no verify_ function; "
                                     "skipped")
                continue
            found = self.world(row, "scenario", where, f"{mode}-mode verifier of task {task_idx}")
            if found is not None:
                found.verifiers.setdefault(task_idx, {})[mode] = code
                moved += mode != file_mode
        if moved:
            other = "sql" if file_mode == "code" else "code"
            function = next(name for name, mode in VERIFIER_MODES.items() if mode == other)
            self.problems.append(f"{path.name}: {moved} of its verifiers define {function}: they run in {other} mode")


def read_worlds(source: Path, wanted: set[str] | None, problems: list[str]) -> dict[str, World]:
    """Every scenario of the files (or only the wanted ones, by normalised name), as far as its rows are well
    formed."""
    reader = _Reader(wanted, problems)
    for stem in FILES:
        if (source / f"{stem}.jsonl").is_file():
            reader.read_parts(source, stem)
        elif stem != "gen_scenario":  # descriptions are optional
            raise ImportFailedError(f"{source} has no {stem}.jsonl: an AWM dataset folder holds "
                                    f"{', '.join(f + '.jsonl' for f in FILES)} and a verifier file")
    for mode, stem in VERIFIER_FILES.items():
        if (source / f"{stem}.jsonl").is_file():
            reader.read_verifiers(source / f"{stem}.jsonl", mode)
    renamed = [f"{world.display!r} -> {world.name}" for world in reader.worlds.values() if world.display]
    if renamed:
        problems.append(f"{len(renamed)} scenarios are named as AWM normalises their names: "
                        f"{', '.join(renamed[:3])}{', ...' if len(renamed) > 3 else ''}")
    return reader.worlds

"""What a Harbor task's record needs from the machine that serves it: task.toml's ${VAR} and ${VAR:-default},
filled in from the environment of the process (the importer's, then the server's, as Harbor fills them from the
host's). Shared by the importer (a task that names an unset variable is refused) and the adapter."""

from __future__ import annotations

import os
import re
from typing import Any

VARIABLE = re.compile(r"\$\{(\w+)(?::-([^}]*))?\}")


class TaskRefusedError(ValueError):
    """The task needs what cannot be had here; the message names the key and why."""


def resolved(values: dict[str, str]) -> dict[str, str]:
    """task.toml's ${VAR} and ${VAR:-default} filled in from this process's environment (the server's, as Harbor
    fills them from the host's); a variable it has not, and no default, is a TaskRefusedError naming it."""
    def one(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        if name in os.environ:
            return os.environ[name]
        if default is None:
            raise TaskRefusedError(f"task.toml names ${{{name}}}, which is not set here: set {name} where the "
                                   "environment is imported and served")
        return default
    return {key: VARIABLE.sub(one, value) for key, value in values.items()}


def variables_missing(task: dict[str, Any]) -> str | None:
    """Why a task's record cannot be played with this process's environment (a ${VAR} unset); None if it can."""
    phases = [task["verifier"], *(step["verifier"] for step in task["steps"])]
    try:
        for values in (task["environment"]["env"], task["solution"]["env"], *(phase["env"] for phase in phases)):
            resolved(values)
    except TaskRefusedError as exc:
        return str(exc)
    return None


def file_mode(mode: str | None, current: int) -> int:
    """The permission bits of a file of `current` mode after a Dockerfile's chmod `mode` ("755", "+x", "u+x"; None:
    unchanged)."""
    if mode is None:
        return current & 0o777
    if mode.isdigit():
        return int(mode, 8)
    return current & 0o777 | (0o111 if "x" in mode else 0) | (0o444 if "r" in mode else 0)


def sides(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The containers of a task's record: the task's own, and each separate verifier's."""
    verifiers = [record["verifier"], *(step["verifier"] for step in record["steps"])]
    return [record, *(verifier["separate"] for verifier in verifiers if "separate" in verifier)]

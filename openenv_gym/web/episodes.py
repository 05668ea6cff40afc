"""An episodes file, as `openenv-gym rollout --output` writes it (one JSON object per line, rollout/records.py),
read for browsing: a short summary of each episode stays in memory, and a whole episode is read back from its
place in the file when it is asked for. A file still being written is read up to its last complete line, and
from there on the next refresh; a file written anew is read again from the start."""

from __future__ import annotations

import math
import threading
from pathlib import Path
from typing import Any

import orjson

MAX_LISTED_BAD_LINES = 20  # the page names this many unreadable lines; the rest are only counted


class EpisodeFile:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()  # the viewer answers from several threads
        self._forget()

    def _forget(self) -> None:
        self.summaries: list[dict[str, Any]] = []
        self.bad_lines: list[dict[str, Any]] = []  # {"line": n (1-based), "reason": ...}, the first few
        self.bad_line_count = 0
        self._offsets: list[int] = []  # where each episode's line starts
        self._read_to = 0  # bytes read: up to the end of the last complete line
        self._lines = 0

    def refresh(self) -> None:
        """Read the lines written since the last refresh (all of them when the file was written anew)."""
        with self._lock, self.path.open("rb") as file:
            if file.seek(0, 2) < self._read_to:
                self._forget()  # shorter than what was read: a new file under the old name
            file.seek(self._read_to)
            for line in file:
                if not line.endswith(b"\n") and _parse(line) is None:
                    break  # its writer has not finished it: read it next time
                self._add(line)

    def _add(self, line: bytes) -> None:
        offset, self._read_to, self._lines = self._read_to, self._read_to + len(line), self._lines + 1
        if not line.strip():
            return
        episode = _parse(line)
        reason = "not a JSON object" if episode is None else _unreadable(episode)
        if reason is not None:
            self.bad_line_count += 1
            if len(self.bad_lines) < MAX_LISTED_BAD_LINES:
                self.bad_lines.append({"line": self._lines, "reason": reason})
            return
        assert episode is not None
        self._offsets.append(offset)
        self.summaries.append(summary(len(self.summaries), self._lines, episode))

    def episode(self, index: int) -> dict[str, Any]:
        """The whole episode `index` (its place among the readable ones); IndexError if there is none."""
        with self._lock:
            if not 0 <= index < len(self._offsets):
                raise IndexError(f"no episode {index}: the file holds {len(self._offsets)} (0 to "
                                 f"{len(self._offsets) - 1})")
            offset = self._offsets[index]
        with self.path.open("rb") as file:
            file.seek(offset)
            episode = _parse(file.readline())
        if episode is None:
            raise IndexError(f"episode {index} changed on disk: reload the page")
        return episode


def _parse(line: bytes) -> dict[str, Any] | None:
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _unreadable(episode: dict[str, Any]) -> str | None:
    """Why this object is not an episode the viewer can show, or None."""
    rewards = episode.get("rewards", [])
    if not isinstance(rewards, list) or not all(_number(r) for r in rewards):
        return "'rewards' is not a list of numbers"
    if "total_reward" in episode and not _number(episode["total_reward"]):
        return "'total_reward' is not a number"
    if not isinstance(episode.get("messages", []), list):
        return "'messages' is not a list"
    return None


def task_label(episode: dict[str, Any]) -> str:
    """What the episode played, as the filter matches it: split/index, the task spec, or the seed."""
    options = episode.get("options") if isinstance(episode.get("options"), dict) else {}
    if "split" in options:
        return f"{options['split']}/{options['index']}" if "index" in options else str(options["split"])
    if "task_spec" in options:
        return orjson.dumps(options["task_spec"]).decode()[:120]
    seed = episode.get("seed")
    return f"seed {seed}" if seed is not None else "-"


def summary(index: int, line: int, episode: dict[str, Any]) -> dict[str, Any]:
    rewards = episode.get("rewards", [])
    error = episode.get("error")
    group, member, group_reward = episode.get("group"), episode.get("group_member"), episode.get("group_reward")
    return {"index": index, "line": line, "task": task_label(episode),
            "return": float(episode.get("total_reward", sum(rewards))), "steps": len(rewards),
            "terminated": bool(episode.get("terminated")), "truncated": bool(episode.get("truncated")),
            "error": None if error is None else str(error),
            # GRPO groups (rollout --group-size): which group, which member, and what the group's scoring gave it
            "group": None if group is None else str(group), "member": member if isinstance(member, int) else None,
            "group_reward": float(group_reward) if _number(group_reward) else None}

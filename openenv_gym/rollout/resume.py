"""Continuing a rollout run that stopped (`openenv-gym rollout --output F --resume`): which of the run's planned
episodes (or groups) F holds already, so that the run plays the others, none twice and none skipped.

Episode n of a run has seed `seed + n`, or task n of its split; group n is named "g{n}". A line cut short (the
run died while writing it) and the lines of a group not whole are taken out of F, and those are played again.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openenv_gym.rollout.records import read_lines


@dataclass(frozen=True)
class Played:
    numbers: frozenset[int]  # the plan's episodes (or groups) F holds whole
    lines: int  # the lines kept
    dropped: int  # the lines taken out: cut short, or of a group not whole


def played(path: Path, *, episodes: int, seed: int, split: str | None, group_size: int | None) -> Played:
    """What `path` holds of the run planned by these arguments; rewrites it without what will be played again.
    ValueError when a line belongs to another run (another seed, split or size)."""
    if not path.exists():
        return Played(frozenset(), 0, 0)
    kept: list[tuple[int, bytes]] = []
    dropped = 0
    for raw, line in read_lines(path):
        if line is None:
            dropped += 1  # cut short while it was written
            continue
        kept.append((_number(line, path, seed=seed, split=split, grouped=group_size is not None), raw))
    if group_size is not None:
        members = Counter(number for number, _ in kept)
        whole = [(number, raw) for number, raw in kept if members[number] == group_size]
        dropped += len(kept) - len(whole)
        kept = whole
    bad = sorted({number for number, _ in kept if not 0 <= number < episodes})
    if bad:
        raise ValueError(f"{path} holds {'group' if group_size else 'episode'} {bad[0]}, outside this run's 0 to "
                         f"{episodes - 1}: resume with the --seed and --episodes of the run that wrote it, or write "
                         "elsewhere")
    if dropped:
        _rewrite(path, [raw for _, raw in kept])
    return Played(frozenset(number for number, _ in kept), len(kept), dropped)


def _number(line: Any, path: Path, *, seed: int, split: str | None, grouped: bool) -> int:
    """The plan number of an episode line."""
    if not isinstance(line, dict):
        raise ValueError(f"{path} holds a line that is no episode; is it an episodes file?")
    number = _task_number(line, path, seed=seed, split=split)
    if not grouped:
        return number
    group = line.get("group")
    if not (isinstance(group, str) and group[:1] == "g" and group[1:].isdigit()):
        raise ValueError(f"{path} holds an episode of no group; resume it without --group-size")
    if int(group[1:]) != number:
        raise ValueError(f"{path} holds group {group} playing task {number} of this run's plan: it was written by "
                         "a run of another --seed or --split; resume with those")
    return number


def _task_number(line: dict[str, Any], path: Path, *, seed: int, split: str | None) -> int:
    """Which of the run's tasks an episode line played: its split index, or its seed less the run's first."""
    options = line.get("options") if isinstance(line.get("options"), dict) else {}
    if split is not None:
        if options.get("split") != split or not isinstance(options.get("index"), int):
            raise ValueError(f"{path} holds an episode of another split than {split!r}; resume with the run's --split")
        return options["index"]
    if not isinstance(line.get("seed"), int):
        raise ValueError(f"{path} holds an episode with no seed; resume with the run's --split")
    return line["seed"] - seed


def _rewrite(path: Path, lines: list[bytes]) -> None:
    """Replace the file at once (a crash now leaves the old one or the new one, never half)."""
    scratch = path.with_name(path.name + ".resume")
    scratch.write_bytes(b"".join(raw + b"\n" for raw in lines))
    os.replace(scratch, path)

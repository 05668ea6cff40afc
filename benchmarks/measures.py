"""What the benchmarks read of a process (memory, descriptors, CPU time) and of loopback, and where they keep
their results."""

from __future__ import annotations

import json
import os
import statistics
from collections.abc import Callable
from pathlib import Path

RESULTS = Path(__file__).parent / "results"
TICKS = os.sysconf("SC_CLK_TCK")


def rss_bytes(pid: int) -> int:
    """Resident memory of one process (a worker), from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise ProcessLookupError(f"no VmRSS for process {pid}")


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of one process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def loopback_bytes() -> int:
    for line in Path("/proc/net/dev").read_text().splitlines():
        name, _, counters = line.partition(":")
        if name.strip() == "lo":
            return int(counters.split()[0])
    raise OSError("no loopback interface in /proc/net/dev")


def save_result(name: str, result: dict) -> None:
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(result, indent=2))


def alternating(rounds: int, **measures: Callable[[], dict]) -> tuple[dict[str, list[dict]], dict[str, float]]:
    """Each measure run `rounds` times, in turn (A B A B ...: the machine's noise falls on every side alike); every
    run's result by name, and the median of their "steps_per_s"."""
    runs: dict[str, list[dict]] = {name: [] for name in measures}
    for _ in range(rounds):
        for name, measure in measures.items():
            runs[name].append(measure())
    return runs, {name: statistics.median(r["steps_per_s"] for r in results) for name, results in runs.items()}

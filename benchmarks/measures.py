"""What the reliability benchmarks read of a server process, and where they keep their results."""

from __future__ import annotations

import json
import os
from pathlib import Path

RESULTS = Path(__file__).parent / "results"


def rss_bytes(pid: int) -> int:
    """Resident memory of one process (a worker), from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise ProcessLookupError(f"no VmRSS for process {pid}")


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def save_result(name: str, result: dict) -> None:
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(result, indent=2))

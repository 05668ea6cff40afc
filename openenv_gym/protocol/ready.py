"""How a server process reports to whoever started it, on a pipe it was given: one JSON object per line.

    {"building": "<venv path>"}   first use of an imported environment: its virtual environment is being
                                  built, which may take minutes (no start-up timeout applies meanwhile)
    {"ready": "ws://127.0.0.1:41235", "workers": 2, "pid": 1234}
                                  serving; the last line written

The pipe closing without a ready line means the server did not start (its error went to its stderr).
"""

from __future__ import annotations

from typing import Any

import orjson


def status_line(**status: Any) -> bytes:
    return orjson.dumps(status) + b"\n"


def read_status(line: bytes) -> dict[str, Any]:
    status = orjson.loads(line)
    if not isinstance(status, dict):
        raise ValueError(f"a server status line holds a JSON object, got {line[:100]!r}")
    return status

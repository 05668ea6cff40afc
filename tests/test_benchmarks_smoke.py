"""The benchmark scripts still run (tiny sizes; the figures come from `make bench`)."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parent.parent


def test_latency_benchmark_runs():
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "latency.py"), "--steps", "50",
                             "--repeats", "1"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "p50 / anchor" in result.stdout and "first observation" in result.stdout
    figures = json.loads((ROOT / "benchmarks" / "results" / "latency.json").read_text())
    assert figures["remote_env_step"]["n"] == 50 and figures["anchor_bare_websocket"]["p50_us"] > 0

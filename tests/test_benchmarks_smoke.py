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


def test_capacity_benchmark_runs():
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "capacity.py"), "--sessions", "300",
                             "--connections", "40", "--steps", "1", "--seconds", "0.3"],
                            capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr
    figures = json.loads((ROOT / "benchmarks" / "results" / "capacity.json").read_text())
    assert figures["many_sessions"]["errors"] == 0 and figures["many_connections"]["connections"] == 40
    assert figures["cpu_scaling"]["ratio"] > 0


def test_throughput_comparison_runs_without_openenv(tmp_path):
    result = subprocess.run([sys.executable, "-m", "openenv_gym", "bench", "--sessions", "16", "--seconds", "0.2",
                             "--skip-openenv", "--out", str(tmp_path)], capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr
    assert "openenv_gym make_vec" in result.stdout and "wire limit" in result.stdout
    assert (tmp_path / "throughput.png").stat().st_size > 0
    rows = json.loads((tmp_path / "throughput.json").read_text())
    assert {r["system"] for r in rows} == {"openenv_gym make_vec", "wire limit (websockets+orjson)"}


def test_verifiers_comparison_runs(tmp_path):
    result = subprocess.run([sys.executable, "-m", "openenv_gym.bench.verifiers_compare", "--sessions", "20",
                             "--rounds", "1", "--out", str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    figures = json.loads((tmp_path / "verifiers_throughput.json").read_text())
    assert figures["ours"]["errors"] == figures["verifiers_in_process"]["errors"] == 0
    assert figures["ours"]["steps"] == figures["verifiers_in_process"]["steps"] > 20  # the same games on both sides

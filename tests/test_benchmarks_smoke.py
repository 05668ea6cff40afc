"""The benchmarks and `openenv-gym bench` run (tiny sizes; the figures come from `make bench`)."""

import json
import subprocess
import sys

import pytest
from awm_worlds import scratch_dataset
from conftest import ROOT

from benchmarks.episodes import ENVS

# The comparisons that start the most (imports, venvs, the anchors' own runners): run by `make bench`, which runs
# them in full too, so that `make test` stays within its 20 minutes.
BENCH = pytest.mark.bench


def run_module(*args: str, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def test_latency_benchmark_runs():
    result = run_module("benchmarks.latency", "--steps", "50", "--repeats", "1", timeout=120)
    assert result.returncode == 0, result.stderr
    assert "p50 / anchor" in result.stdout and "first observation" in result.stdout
    figures = json.loads((ROOT / "benchmarks" / "results" / "latency.json").read_text())
    assert figures["remote_env_step"]["n"] == 50 and figures["anchor_bare_websocket"]["p50_us"] > 0


def test_capacity_benchmark_runs():
    result = run_module("benchmarks.capacity", "--sessions", "300", "--connections", "40", "--steps", "1",
                        "--seconds", "0.3", timeout=180)
    assert result.returncode == 0, result.stderr
    figures = json.loads((ROOT / "benchmarks" / "results" / "capacity.json").read_text())
    assert figures["many_sessions"]["errors"] == 0 and figures["many_connections"]["connections"] == 40
    assert figures["cpu_scaling"]["ratio"] > 0


@BENCH
def test_scaling_benchmark_runs():
    result = run_module("benchmarks.scaling", "--rounds", "1", "--seconds", "0.3", "--cpu-sessions", "16",
                        "--sessions", "200", "--steps", "2", timeout=300)
    assert result.returncode == 0, result.stderr
    figures = json.loads((ROOT / "benchmarks" / "results" / "scaling.json").read_text())
    assert figures["scaling"]["ratio"] > 0 and figures["session_costs"]["errors"] == 0


def test_recovery_benchmark_runs():
    result = run_module("benchmarks.recovery", "--rounds", "2", "--num-envs", "16", "--kinds", "plain", timeout=300)
    assert result.returncode == 0, result.stderr
    figures = json.loads((ROOT / "benchmarks" / "results" / "recovery.json").read_text())["plain"]
    assert figures["recovered"] == 2 and figures["exceptions_from_step"] == 0


def test_throughput_comparison_runs_without_openenv(tmp_path):
    result = run_module("benchmarks.throughput", "--sessions", "16", "--seconds", "0.2", "--skip-openenv",
                        "--out", str(tmp_path), timeout=180)
    assert result.returncode == 0, result.stderr
    assert "openenv_gym make_vec" in result.stdout and "wire limit" in result.stdout
    assert (tmp_path / "throughput.png").stat().st_size > 0
    rows = json.loads((tmp_path / "throughput.json").read_text())
    assert {r["system"] for r in rows} == {"openenv_gym make_vec", "wire limit (websockets+orjson)"}


@pytest.mark.env_venvs(ENVS / "vf_guessing")
@BENCH
def test_verifiers_comparison_runs(tmp_path):
    result = run_module("benchmarks.verifiers_compare", "--sessions", "20", "--rounds", "1", "--out", str(tmp_path),
                        timeout=600)
    assert result.returncode == 0, result.stderr
    figures = json.loads((tmp_path / "verifiers_throughput.json").read_text())
    assert figures["ours"]["errors"] == figures["verifiers_in_process"]["errors"] == 0
    assert figures["ours"]["steps"] == figures["verifiers_in_process"]["steps"] > 20  # the same games on both sides


@pytest.mark.env_venvs(ENVS / "vf_guessing")
@BENCH
def test_verifiers_groups_comparison_runs(tmp_path):
    result = run_module("benchmarks.verifiers_groups", "--sessions", "8", "--rounds", "1", "--group-size", "4",
                        "--out", str(tmp_path), timeout=600)
    assert result.returncode == 0, result.stderr
    figures = json.loads((tmp_path / "verifiers_groups.json").read_text())
    assert figures["ours"]["errors"] == figures["verifiers_generate"]["errors"] == 0
    assert figures["ours"]["steps"] == figures["verifiers_generate"]["steps"] > 8  # the same games on both sides


@pytest.mark.env_venvs(ROOT / "tests" / "verifiers_v1_envs" / "word_echo")
@BENCH
def test_verifiers_v1_comparison_runs(tmp_path):
    result = run_module("benchmarks.verifiers_v1_compare", "--sessions", "4", "--rounds", "1", "--workers", "1",
                        "--out", str(tmp_path), timeout=600)
    assert result.returncode == 0, result.stderr
    figures = json.loads((tmp_path / "verifiers_v1_throughput.json").read_text())
    assert figures["ours"]["errors"] == figures["verifiers_runner"]["errors"] == 0
    assert figures["ours"]["steps"] == figures["verifiers_runner"]["steps"] == 4  # a rollout is one turn


def test_agent_sessions_benchmark_runs():
    result = run_module("benchmarks.agent_sessions", "--sessions", "8", "--turns", "5", "--programs", "12",
                        timeout=300)
    assert result.returncode == 0, result.stderr
    figures = json.loads((ROOT / "benchmarks" / "results" / "agent_sessions.json").read_text())
    assert figures["agent"]["errors"] == figures["native"]["errors"] == figures["crowd"]["errors"] == 0
    assert figures["agent"]["turns"] == 40 and figures["crowd"]["processes"] >= 12


def test_sandbox_benchmark_runs():
    result = run_module("benchmarks.sandbox", "--starts", "5", "--fresh", "3", "--sessions", "4", "--rounds", "2",
                        "--crowd", "12", timeout=300)
    assert result.returncode == 0, result.stderr
    figures = json.loads((ROOT / "benchmarks" / "results" / "sandbox.json").read_text())
    assert figures["sandboxed"]["errors"] == figures["unsandboxed"]["errors"] == 0
    assert figures["sandboxed"]["crowd"]["errors"] == 0 and figures["sandboxed"]["crowd"]["programs"] == 12
    assert figures["sandboxed"]["left_after_the_crowd"] == {"processes": 0, "control_groups": 0, "files": 0}


@pytest.mark.env_venvs.with_args(ROOT / "tests" / "harbor_tasks")
def test_harbor_benchmark_runs():
    result = run_module("benchmarks.harbor", "--sessions", "6", "--rounds", "1", "--parts", "2", timeout=300)
    assert result.returncode == 0, result.stderr
    figures = json.loads((ROOT / "benchmarks" / "results" / "harbor.json").read_text())
    assert figures["crowd"]["errors"] == 0 and figures["crowd"]["top_reward"] == figures["crowd"]["trials"] == 6
    assert set(figures["parts_p50_ms"]) == {"reset", "reset_with_oracle", "bash_step", "submit"}


@BENCH
def test_dialects_benchmark_runs():
    result = run_module("benchmarks.dialects", "--sessions", "4", "--turns", "2", "--programs", "4", timeout=600)
    assert result.returncode == 0, result.stderr
    figures = json.loads((ROOT / "benchmarks" / "results" / "dialects.json").read_text())
    assert len(figures["per_turn"]) == 8 and all(row["errors"] == 0 for row in figures["per_turn"].values())
    assert all(crowd["errors"] == 0 for crowd in figures["crowds"].values())


@BENCH
def test_overlay_and_cli_agents_benchmarks_run():
    assert run_module("benchmarks.overlay", "--opens", "2", timeout=300).returncode == 0
    figures = json.loads((ROOT / "benchmarks" / "results" / "overlay.json").read_text())
    assert figures["open_with_overlays_p50_ms"] > 0 and figures["open_p50_ms"] > 0
    result = run_module("benchmarks.cli_agents", "--episodes", "1", timeout=600)
    assert result.returncode == 0, result.stderr
    figures = json.loads((ROOT / "benchmarks" / "results" / "cli_agents.json").read_text())
    assert set(figures) == {"codex", "claude"} and all(row["served_p50_ms"] > 0 for row in figures.values())


def test_sandbox_abuse_benchmark_runs():
    result = run_module("benchmarks.sandbox_abuse", "--seconds", "0.5", "--attacks", "fork_bomb,kill_all",
                        timeout=300)
    assert result.returncode == 0, result.stderr
    figures = json.loads((ROOT / "benchmarks" / "results" / "sandbox_abuse.json").read_text())
    assert figures["quiet"]["steps"] > 0 and figures["quiet"]["errors"] == 0
    assert set(figures["attacks"]) == {"fork_bomb", "kill_all"}
    assert all(row["server_alive"] and row["errors"] == 0 and row["steps"] > 0 and row["attack_episodes"] > 0
               for row in figures["attacks"].values())


def test_groups_benchmark_runs():
    result = run_module("benchmarks.groups", "--sessions", "16", "--episodes", "64", "--rounds", "1",
                        "--group-size", "4", timeout=120)
    assert result.returncode == 0, result.stderr
    figures = json.loads((ROOT / "benchmarks" / "results" / "groups.json").read_text())
    assert figures["runs"]["plain"][0]["episodes"] == figures["runs"]["groups"][0]["episodes"] == 64
    assert figures["ratio"] > 0


def test_cli_bench_measures_an_environment(tmp_path):
    out = tmp_path / "bench.json"
    result = run_module("openenv_gym", "bench", "openenv/guess", "--num-envs", "4", "32", "--seconds", "0.3",
                        "--workers", "1", "--json", str(out), timeout=120)
    assert result.returncode == 0, result.stderr
    assert "steps/s" in result.stdout and "server bytes/session" in result.stdout
    rows = json.loads(out.read_text())
    assert [row["sessions"] for row in rows] == [4, 32]
    assert all(row["steps_per_s"] > 0 and row["p99_ms"] >= row["p50_ms"] > 0 for row in rows)
    assert all(row["server_bytes_per_session"] is not None and row["errors"] == 0 for row in rows)


def test_cli_bench_plot_says_what_is_missing_without_matplotlib(tmp_path):
    code = ("import sys; sys.modules['matplotlib'] = None\n"  # as if matplotlib were not installed
            "from openenv_gym.cli import main\n"
            f"main(['bench', 'openenv/echo', '--num-envs', '2', '--seconds', '0.1', '--workers', '1', "
            f"'--plot', {str(tmp_path / 'plot.png')!r}])")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode != 0 and "--plot needs matplotlib" in result.stderr
    assert "steps/s" in result.stdout  # the figures were printed before the plot failed
    assert not (tmp_path / "plot.png").exists()


@BENCH
def test_trainer_benchmark_runs_without_openenv(tmp_path):
    pytest.importorskip("trl")
    result = run_module("benchmarks.trl_step", "--batches", "16", "--steps", "1", "--workers", "1",
                        "--skip-openenv", "--out", str(tmp_path), timeout=600)
    assert result.returncode == 0, result.stderr
    rows = {row["system"]: row for row in json.loads((tmp_path / "trl_step.json").read_text())}
    assert set(rows) == {"rollout_func", "environment_factory"}
    assert all(row["env_s"] > 0 and row["batch"] == 16 for row in rows.values())
    assert rows["rollout_func"]["mean_reward"] == pytest.approx(rows["environment_factory"]["mean_reward"])


@pytest.mark.env_venvs(ENVS / "openenv_echo")
@BENCH
def test_openenv_comparison_runs():
    result = run_module("benchmarks.openenv_compare", "--sessions", "8", "--steps", "160", "--hold", "50",
                        "--budget", "0.3", timeout=600)
    assert result.returncode == 0, result.stderr
    figures = json.loads((ROOT / "benchmarks" / "results" / "openenv_compare.json").read_text())
    [row] = figures["rows"]
    for side in ("anchor", "openenv_client_on_ours", "make_vec_on_ours"):
        assert row[side]["errors"] == 0 and row[side]["steps_per_s"] > 0
    assert row["anchor"]["steps"] == row["openenv_client_on_ours"]["steps"] == 8 * 20  # the same work on both
    assert figures["hold"]["sessions_open"] == 50 and figures["hold"]["errors"] == 0


@pytest.mark.env_venvs.with_args(scratch_dataset)
def test_awm_comparison_runs():
    result = run_module("benchmarks.awm_compare", "--sessions", "4", "--hold", "20", "--seconds", "0.5", timeout=600)
    assert result.returncode == 0, result.stderr
    figures = json.loads((ROOT / "benchmarks" / "results" / "awm_compare.json").read_text())
    assert figures["hold"] == figures["hold"] | {"sessions": 20, "errors": 0}
    for side in ("ours", "awm_way"):
        assert figures[side]["calls_per_s"] > 0 and figures[side]["reset"]["n"] > 0


def test_web_benchmark_runs():
    result = run_module("benchmarks.web", "--tabs", "2", "--rounds", "1", "--seconds", "0.3", timeout=300)
    assert result.returncode == 0, result.stderr
    figures = json.loads((ROOT / "benchmarks" / "results" / "web.json").read_text())
    assert figures["page"]["first_step_ms"]["p50"] > 0 and figures["page"]["reset_ms"]["p50"] > 0
    assert len(figures["throughput"]["rounds"]["on"]) == len(figures["throughput"]["rounds"]["off"]) == 1
    assert figures["throughput"]["ratio"] > 0


@pytest.mark.env_venvs(ROOT / "tests" / "nemo_servers" / "resources_servers" / "tally")
@BENCH
def test_nemo_comparison_runs(tmp_path):
    result = run_module("benchmarks.nemo_compare", "--sessions", "4", "--rounds", "1", "--calls", "3", "--capacity",
                        "40", "--out", str(tmp_path), timeout=900)
    assert result.returncode == 0, result.stderr
    figures = json.loads((tmp_path / "nemo_throughput.json").read_text())
    assert figures["ours"]["errors"] == figures["nemo_gym_server"]["errors"] == 0
    assert figures["ours"]["steps"] == figures["nemo_gym_server"]["steps"] == 12  # 4 players x 3 calls
    assert figures["capacity"] | {"seconds": 0} == {"episodes": 40, "errors": 0, "cross_episode_state": 0,
                                                   "seconds": 0, "error_kinds": []}


@pytest.mark.env_venvs(ROOT / "tests" / "nemo_servers" / "resources_servers" / "tally")
@BENCH
@pytest.mark.parametrize("judged", [False, True])
def test_nemo_checkout_sweep_runs(tmp_path, judged):
    """The sweep over our fixtures as a checkout: each server in its class; with --only-judged, the judged one alone,
    played through the stand-in judge."""
    out = tmp_path / "sweep.json"
    result = run_module("benchmarks.nemo_examples", str(ROOT / "tests" / "nemo_servers"), "--rows", "2", "--out",
                        str(out), *(["--only-judged"] if judged else []), timeout=900)
    assert result.returncode == 0, result.stderr
    figures = json.loads(out.read_text())
    classes = {name: outcome["class"] for name, outcome in figures["servers"].items()}
    if judged:
        assert classes == {"counting_base": "refused at import", "judged_answer": "played"}
        assert figures["judge_requests"] == 2
    else:
        assert classes == {"counting_base": "refused at import", "judged_answer": "needs unreachable",
                           "optional_judge": "played", "reverse_gym": "played", "tally": "played"}


@pytest.mark.env_venvs(ROOT / "tests" / "nemo_servers" / "resources_servers" / "tally")
@BENCH
def test_nemo_wheel_replay_runs(tmp_path):
    """The sweep with --replay over the resource servers the installed nemo-gym 0.7.0 ships (its site-packages), on a
    few of each style the 0.7.0 sweep found: stored rollouts that play a Gymnasium server's rows by their
    _ng_task_index (their input holds the reset's observation too), an agent bounded to one turn, tools exposed over
    MCP, a reward NeMo's own process gives differently from what it stored (lc_niah's overlap rule), and blackjack's
    random deals (NeMo's own process differs from run to run)."""
    from openenv_gym.importers import import_environment
    from openenv_gym.manifests import load_manifest
    from openenv_gym.manifests.venvs import ensure_venv

    tally = ROOT / "tests" / "nemo_servers" / "resources_servers" / "tally"
    python = ensure_venv(load_manifest(import_environment(tally, "tally", tmp_path, check=False)[0].folder))
    site = subprocess.run([str(python), "-c", "import nemo_gym, os; print(os.path.dirname(os.path.dirname("
                                              "nemo_gym.__file__)))"], capture_output=True, text=True, check=True)
    out = tmp_path / "replay.json"
    servers = ["example_multi_turn_gymnasium", "circle_click", "example_mcp_weather", "lc_niah", "blackjack"]
    result = run_module("benchmarks.nemo_examples", site.stdout.strip(), "--replay", "--out", str(out),
                        *(part for name in servers for part in ("--server", name)), timeout=900)
    assert result.returncode == 0, result.stderr
    outcomes = json.loads(out.read_text())["servers"]
    assert {name: outcome["class"] for name, outcome in outcomes.items()} == dict.fromkeys(servers, "played")
    verdicts = {name: {replay["verdict"].split(":")[0] for replay in outcome["replays"]}
                for name, outcome in outcomes.items()}
    assert verdicts["lc_niah"] == {"theirs"} and verdicts["example_mcp_weather"] == {"same"}
    assert verdicts["example_multi_turn_gymnasium"] == verdicts["circle_click"] == {"same"}


@pytest.mark.env_venvs(ROOT / "tests" / "nemo_servers" / "resources_servers" / "tally")
@BENCH
def test_nemo_layers_benchmark_runs():
    result = run_module("benchmarks.nemo_layers", "--sessions", "2", "--rounds", "1", timeout=600)
    assert result.returncode == 0, result.stderr
    figures = json.loads((ROOT / "benchmarks" / "results" / "nemo_layers.json").read_text())
    assert set(figures) == {"workplace_assistant", "example_session_state_mgmt"}
    assert all(set(rates) == {"session_step", "httpx_to_app", "raw_asgi"} and min(rates.values()) > 0
               for rates in figures.values())


@BENCH
def test_samplers_benchmark_runs(tmp_path):
    """At a tiny size (13 s): every sampler's figure, the gated batches and the overhead come out, in one run."""
    out = tmp_path / "samplers.json"
    result = run_module("benchmarks.samplers", "--groups", "60", "--batches", "20", "--wire-rounds", "20", "--out",
                        str(out), timeout=300)
    assert result.returncode == 0, result.stderr
    figures = json.loads(out.read_text())
    assert set(figures["signal"]) == {"uniform", "curriculum (defaults)",
                                      "curriculum (RFC 013's exact weights, power=1)", "difficulty pools"}
    assert figures["signal"]["uniform"]["vs_uniform"] == 1.0 and figures["gated"]["batches"] == 20
    assert set(figures["overhead_us_per_task_at_100000"]) == {"uniform", "curriculum", "pools"}
    assert figures["over_the_wire"]["sample_64_ms"]["server"] > 0 and "added" in figures["over_the_wire"]["update_ms"]


@BENCH
def test_verifiers_serve_benchmark_runs(tmp_path):
    """At a tiny size: both sides' runs/s with no errors, and the front end's cost per run."""
    out = tmp_path / "verifiers_serve.json"
    result = run_module("benchmarks.verifiers_serve", "--concurrency", "4", "--runs", "8", "--max-concurrent", "4",
                        "--overhead-runs", "16", "--out", str(out), timeout=900)
    assert result.returncode == 0, result.stderr
    figures = json.loads(out.read_text())
    compare = figures["compare"]
    assert compare["ours_4"]["errors"] == compare["verifiers_4"]["errors"] == 0 and compare["ratio_4"] > 0
    overhead = figures["overhead"]
    assert overhead["errors"] == 0 and overhead["ms_per_run"]["native"] > 0
    assert all(cpu > 0 for cpu in overhead["cpu_ms_per_run"].values())  # (each side's processes measured)

"""Verifiers' env server protocol (verifiers 0.4, what prime-rl's orchestrator drives): our front end against
Verifiers' own env server, and its cost over our native protocol. One JSON line, written to
benchmarks/results/verifiers_serve.json too:

    python -m benchmarks.verifiers_serve [--concurrency 64 1024] [--runs 1024] [--overhead-runs 512] [--out F]

1. The same v1 env (tests/verifiers_v1_envs/word_echo) behind Verifiers' own `serve_env` with one worker (as
   prime-rl's env-server runs it: benchmarks/verifiers_env_server.py) and behind `openenv-gym serve ENV
   --verifiers-port` with one front-end worker and one server worker, both bounded to the same runs at once per
   worker (--max-concurrent); the same EnvClient script (benchmarks/verifiers_client.py) sends `--runs` runs at each
   concurrency, the same scripted model server (tests/openai_server.py) answers; runs/s and errors of each side.
2. The front end's cost per run: the same episodes of openenv/guess played through EnvClient and our front end, and
   with rollouts() over our native protocol, the same number at once, the same model server: the difference of
   their seconds per run, and of the CPU their clients spend per run (EnvClient and the front end; rollouts()).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORD_ECHO = ROOT / "tests" / "verifiers_v1_envs" / "word_echo"
RESULTS = Path(__file__).resolve().parent / "results" / "verifiers_serve.json"
MODEL_SERVER = ("import sys, time; sys.path.insert(0, 'tests'); from openai_server import ScriptedServer\n"
                "with ScriptedServer() as server:\n    print(server.url, flush=True)\n    sys.stdin.read()")


@contextlib.contextmanager
def scripted_model() -> Iterator[str]:
    """The tests' scripted model server (tests/openai_server.py), in a process of its own: a client in this
    process must not share its interpreter with it. Its URL."""
    server = subprocess.Popen([sys.executable, "-c", MODEL_SERVER], cwd=ROOT, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        yield server.stdout.readline().strip()
    finally:
        server.stdin.close()
        server.wait(30)


def client_figures(python: str, address: str, model_url: str, runs: int, concurrency: int,
                   tasks: list | None = None, taskset: Path | None = None) -> dict:
    which = ["--tasks", json.dumps(tasks)] if tasks is not None else \
        ["--taskset", str(taskset), taskset.name, "--indices", *map(str, range(6))]
    done = subprocess.run([python, "-m", "benchmarks.verifiers_client", address, "--model-url", model_url,
                           "--model", "m", *which, "--runs", str(runs), "--concurrency", str(concurrency)],
                          capture_output=True, text=True, cwd=ROOT, timeout=7200)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


@contextlib.contextmanager
def verifiers_own(python: str, max_concurrent: int) -> Iterator[str]:
    server = subprocess.Popen([python, "-m", "benchmarks.verifiers_env_server", str(WORD_ECHO), WORD_ECHO.name,
                               "--workers", "1", "--max-concurrent", str(max_concurrent)],
                              cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        yield server.stdout.readline().split()[1]
    finally:
        server.stdin.close()
        server.wait(60)


def compare(concurrencies: list[int], runs: int, max_concurrent: int) -> dict:
    from openenv_gym.client.local import LocalServer
    from openenv_gym.importers import import_environment
    from openenv_gym.manifests import load_manifest
    from openenv_gym.manifests.venvs import ensure_venv

    with contextlib.ExitStack() as stack:
        scratch = Path(stack.enter_context(__import__("tempfile").TemporaryDirectory()))
        folder = import_environment(WORD_ECHO, WORD_ECHO.name, scratch, check=False)[0].folder
        python = str(ensure_venv(load_manifest(folder)))
        model_url = stack.enter_context(scripted_model())
        ours = stack.enter_context(LocalServer(str(folder), 1, 100_000, "--verifiers-port", "0",
                                               "--verifiers-workers", "1", "--max-concurrent", str(max_concurrent)))
        theirs = stack.enter_context(verifiers_own(python, max_concurrent))
        figures = {}
        for concurrency in concurrencies:
            for side, address in (("verifiers", theirs), ("ours", ours.status["verifiers"])):
                client_figures(python, address, model_url, min(16, runs), 8, taskset=WORD_ECHO)  # warm
                figures[f"{side}_{concurrency}"] = client_figures(python, address, model_url, runs, concurrency,
                                                                 taskset=WORD_ECHO)
            figures[f"ratio_{concurrency}"] = (figures[f"ours_{concurrency}"]["runs_per_s"]
                                               / figures[f"verifiers_{concurrency}"]["runs_per_s"])
        return figures


def overhead(runs: int, concurrency: int) -> dict:
    """Seconds per run through the front end and with rollouts(), the same guess episodes (seeds) at once; and the
    CPU spent per run on each side's client side: the front end's process and EnvClient's, against the process that
    runs rollouts() (the server's worker and the model server do the same work for both)."""
    import resource

    from benchmarks.agent_sessions import cpu_seconds, tree
    from openenv_gym import OpenAIPolicy, rollouts
    from openenv_gym.client.local import LocalServer
    from openenv_gym.manifests.venvs import ensure_venv
    from openenv_gym.server.verifiers_front import front_end_manifest

    def children_cpu() -> float:
        used = resource.getrusage(resource.RUSAGE_CHILDREN)
        return used.ru_utime + used.ru_stime

    python = str(ensure_venv(front_end_manifest()))
    tasks = [{"seed": seed} for seed in range(runs)]
    with scripted_model() as model_url, LocalServer("guess", 1, 100_000, "--verifiers-port", "0",
                                                    "--verifiers-workers", "1") as server:
        [front_end] = [pid for pid in tree(server.process.pid)
                       if b"openenv_gym_verifiers.serve" in Path(f"/proc/{pid}/cmdline").read_bytes()]
        client_figures(python, server.status["verifiers"], model_url, min(64, runs), concurrency, tasks=tasks)  # warm
        cpu = cpu_seconds(front_end), children_cpu()
        front = client_figures(python, server.status["verifiers"], model_url, runs, concurrency, tasks=tasks)
        front_cpu = cpu_seconds(front_end) - cpu[0], children_cpu() - cpu[1]  # (the front end's, EnvClient's)

        async def native() -> float:
            started = time.perf_counter()
            async for _ in rollouts("openenv/guess", OpenAIPolicy(model_url, "m", max_concurrency=concurrency),
                                    num_envs=concurrency, episodes=runs, seed=0, base_url=server.url):
                pass
            return time.perf_counter() - started
        asyncio.run(native())  # warm
        cpu = time.process_time()
        seconds = asyncio.run(native())
        native_cpu = time.process_time() - cpu
    per_run_ms = {"front_end": 1000 * front["seconds"] / runs, "native": 1000 * seconds / runs}
    cpu_ms = {"front_end": 1000 * front_cpu[0] / runs, "env_client": 1000 * front_cpu[1] / runs,
              "rollouts": 1000 * native_cpu / runs}
    return {"runs": runs, "concurrency": concurrency, "errors": front["errors"], "ms_per_run": per_run_ms,
            "added_ms_per_run": per_run_ms["front_end"] - per_run_ms["native"], "cpu_ms_per_run": cpu_ms,
            "added_cpu_ms_per_run": cpu_ms["front_end"] + cpu_ms["env_client"] - cpu_ms["rollouts"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[64, 1024])
    parser.add_argument("--runs", type=int, default=1024)
    parser.add_argument("--max-concurrent", type=int, default=64, help="runs at once per worker, both sides")
    parser.add_argument("--overhead-runs", type=int, default=512)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    figures = {"compare": compare(args.concurrency, args.runs, args.max_concurrent),
               "overhead": overhead(args.overhead_runs, min(64, args.overhead_runs))}
    args.out.write_text(json.dumps(figures, indent=1))
    print(json.dumps(figures))


if __name__ == "__main__":
    main()

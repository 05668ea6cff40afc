"""The env overhead of one GRPO training step, in one run: a real TRL GRPOTrainer whose generation is a scripted
policy at zero cost (benchmarks/trl_scripted.py), so that its rollout phase is the env path. At each batch size,
three ways to put the same env (`guess`, with the same number of server processes on each side, one per core by
default) under the trainer:

- ours, make_rollout_func: the whole batch stepped in one batch frame per turn;
- ours, environment_factory: one session per rollout, under TRL's own tool loop (resets, then tool calls, one
  rollout after another);
- OpenEnv, the way TRL's OpenEnv docs do it: an environment_factory class with one OpenEnv 0.10.0 client per
  rollout, against OpenEnv's own server (benchmarks/openenv_trl_peer.py, in its own venv).

    python -m benchmarks.trl_step [--batches 64 256] [--steps 6] [--workers N] [--skip-openenv]

Each system runs in a fresh process with its own server. Prints a table and writes trl_step.json to --out
(default benchmarks/results).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from benchmarks.throughput import openenv_python

HERE = Path(__file__).parent
ROOT = HERE.parent
TRL_VERSION = "1.16.0"
SYSTEMS = ("rollout_func", "environment_factory", "openenv")


def ours(system: str, batch: int, steps: int, workers: int) -> dict:
    """One of our two paths, against a local server of `workers` processes."""
    from benchmarks.trl_scripted import MAX_TURNS, train
    from openenv_gym.client.local import LocalServer
    from openenv_gym.integrations.trl import env_reward, environment_factory, make_rollout_func

    server = LocalServer("guess", workers, batch + 100)
    try:
        if system == "rollout_func":
            def env_kwargs(policy):
                return {"reward_funcs": [env_reward], "rollout_func": make_rollout_func(
                    "openenv/guess", base_url=server.url, max_turns=MAX_TURNS, generate=policy.generate)}
        else:
            def env_kwargs(policy):
                return {"environment_factory": environment_factory("openenv/guess", base_url=server.url)}
        return train(batch, steps, env_kwargs)
    finally:
        server.stop()


def openenv_trl_python(venv: Path) -> Path:
    """The OpenEnv venv, with TRL and a CPU torch added on first use."""
    python = openenv_python(venv)
    marker = venv / f".trl-{TRL_VERSION}"
    if not marker.exists():
        print(f"adding TRL {TRL_VERSION} and a CPU torch to {venv} (first run only)...", flush=True)
        torch = subprocess.run([str(python), str(ROOT / "scripts" / "cpu_torch.py")], capture_output=True,
                               text=True, check=True).stdout.split()
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", *torch], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", f"trl=={TRL_VERSION}", "transformers>=5.2",
                        "tokenizers"], check=True)
        marker.touch()
    return python


def measure(system: str, batch: int, steps: int, workers: int, openenv: Path | None) -> dict:
    """Run one system in a fresh process; its JSON result."""
    settings = ["--steps", str(steps), "--workers", str(workers)]
    if system == "openenv":
        command = [str(openenv), "-m", "benchmarks.openenv_trl_peer", "--batch", str(batch), *settings]
    else:
        command = [sys.executable, "-m", "benchmarks.trl_step", "--run", system, "--batches", str(batch), *settings]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"{system} at batch {batch} failed:\n{done.stderr[-3000:]}")
    return {"system": system} | json.loads(done.stdout.strip().splitlines()[-1])


def report(rows: list[dict]) -> str:
    """Env seconds per step (the trainer waiting on the env) and the whole rollout phase, with the ratio of
    each to ours through make_rollout_func at the same batch."""
    lines = [f"{'batch':>5}  {'system':<20} {'env ms/step':>12} {'x rollout_func':>15} {'phase ms/step':>14}"]
    for row in rows:
        anchor = next(r for r in rows if r["batch"] == row["batch"] and r["system"] == "rollout_func")
        ratio = "-" if row is anchor else f"{row['env_s'] / anchor['env_s']:.1f}x"
        lines.append(f"{row['batch']:>5}  {row['system']:<20} {row['env_s'] * 1000:>12.1f} {ratio:>15} "
                     f"{row['phase_s'] * 1000:>14.1f}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--steps", type=int, default=6, help="measured steps per system (after one warm-up)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                        help="server processes on each side (default: one per core, our server's default)")
    parser.add_argument("--skip-openenv", action="store_true")
    parser.add_argument("--openenv-venv", type=Path, default=ROOT / ".venv-openenv")
    parser.add_argument("--out", type=Path, default=HERE / "results", help="folder for trl_step.json")
    parser.add_argument("--run", choices=SYSTEMS[:2], help=argparse.SUPPRESS)  # one of ours, in this process
    args = parser.parse_args()
    if args.run:
        print(json.dumps(ours(args.run, args.batches[0], args.steps, args.workers)), flush=True)
        return
    openenv = None if args.skip_openenv else openenv_trl_python(args.openenv_venv)
    rows = []
    for batch in args.batches:
        for system in SYSTEMS:
            if system == "openenv" and openenv is None:
                continue
            rows.append(measure(system, batch, args.steps, args.workers, openenv))
            print(f"  {system} at batch {batch}: env {rows[-1]['env_s'] * 1000:.1f} ms per step", flush=True)
    print(report(rows))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "trl_step.json").write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()

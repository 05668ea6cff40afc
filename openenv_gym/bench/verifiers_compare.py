"""Verifiers throughput, one run: the multi-turn guessing game (vf_guessing) through openenv_gym, against
the same environment run in process by verifiers itself, both with an instant scripted policy.

Both sides run `sessions` concurrent players, each playing `rounds` episodes back to back, over the same
rows (player i plays row i mod 50); steps/s = model turns / wall time, rollout setup and scoring
included. Ours: the environment imported with `openenv-gym import`, served by `openenv-gym serve
--workers N` in its own venv, driven by the async vector client from this process (send/recv: each
answer is acted on as it arrives). Theirs: the players as coroutines calling `env.run_rollout`, gathered
on one event loop (verifiers_peer.py), as verifiers' own generate() runs rollouts.

    python -m openenv_gym.bench.verifiers_compare [--sessions 500] [--rounds 3] [--workers 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
from pathlib import Path

from openenv_gym.bench.episodes import imported_server, run_players
from openenv_gym.bench.guessing_policy import bisect_guess

HERE = Path(__file__).parent
ROWS = 50  # the game's default dataset size (load_environment(num_rows=50))


def run_verifiers(python: Path, source: Path, sessions: int, rounds: int) -> dict:
    done = subprocess.run([str(python), str(HERE / "verifiers_peer.py"), str(source), "--sessions", str(sessions),
                           "--rounds", str(rounds)], capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"the in-process verifiers run failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = parser.parse_args(argv)

    with imported_server(HERE / "vf_guessing", "bench-guessing", args.workers, args.sessions + 100) as served:
        ours = asyncio.run(run_players(served.url, args.sessions, args.rounds, bisect_guess,
                                      lambda env: {"split": "train", "index": env % ROWS}))
        theirs = run_verifiers(served.python, served.folder / "vendor" / "guessing.py", args.sessions, args.rounds)
    result = {"sessions": args.sessions, "rounds": args.rounds, "workers": args.workers, "ours": ours,
              "verifiers_in_process": theirs, "ratio": ours["steps_per_s"] / theirs["steps_per_s"]}
    print(f"Verifiers multi-turn game, {args.sessions:,} concurrent players x {args.rounds} episodes:")
    print(f"  openenv_gym (imported, served by {args.workers} workers, vector client): "
          f"{ours['steps_per_s']:>8,.0f} steps/s, {ours['errors']} errors")
    print(f"  verifiers in process (one event loop):                      "
          f"{theirs['steps_per_s']:>8,.0f} steps/s, {theirs['errors']} errors")
    print(f"  ours / in process: {result['ratio']:.2f}x")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "verifiers_throughput.json").write_text(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()

"""Verifiers throughput, one run: the multi-turn guessing game (vf_guessing) through openenv_gym, against
the same environment run in process by verifiers itself, both with an instant scripted policy.

Both sides run `sessions` concurrent players, each playing `rounds` episodes back to back, over the same
rows (player i plays row i mod 50); steps/s = model turns / wall time, rollout setup and scoring
included. Ours: the environment imported with `openenv-gym import`, served by `openenv-gym serve
--workers N` in its own venv, driven by the async vector client from this process (send/recv: each
answer is acted on as it arrives). Theirs: the players as coroutines calling `env.run_rollout`, gathered
on one event loop (verifiers_peer.py), as verifiers' own generate() runs rollouts.

    python -m benchmarks.verifiers_compare [--sessions 500] [--rounds 3] [--workers 2]
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from benchmarks.episodes import ENVS, comparison_arguments, imported_server, report, run_peer, run_players
from benchmarks.guessing_policy import bisect_guess

ROWS = 50  # the game's default dataset size (load_environment(num_rows=50))


def run_verifiers(python: Path, source: Path, sessions: int, rounds: int) -> dict:
    return run_peer(python, "benchmarks.verifiers_peer", str(source), "--sessions", str(sessions),
                    "--rounds", str(rounds))


def main(argv: list[str] | None = None) -> dict:
    args = comparison_arguments(argv, __doc__, sessions=500)

    with imported_server(ENVS / "vf_guessing", "bench-guessing", args.workers, args.sessions + 100) as served:
        ours = asyncio.run(run_players(served.url, args.sessions, args.rounds, bisect_guess,
                                      lambda env: {"split": "train", "index": env % ROWS}))
        theirs = run_verifiers(served.python, served.folder / "vendor" / "guessing.py", args.sessions, args.rounds)
    theirs_row = ("verifiers_in_process", "verifiers in process (one event loop)", theirs)
    return report(args, "Verifiers multi-turn game", ours, theirs_row, "verifiers_throughput.json")


if __name__ == "__main__":
    main()

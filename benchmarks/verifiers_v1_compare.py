"""Verifiers v1 throughput, one run: null-harness rollouts of a one-turn taskset (tests/verifiers_v1_envs/
word_echo) through openenv_gym, against the same taskset run by Verifiers' own runner, both with an instant
scripted policy on the same machine.

Ours: the package imported with `openenv-gym import`, served by `openenv-gym serve --workers N` in its venv, its
harness programs forked warm; players driven by the async vector client from this process. Theirs:
`env.run_episode` per rollout inside `env.serving()` as Verifiers' eval runner runs them, gathered on one event
loop, each harness program started by Verifiers' subprocess runtime (verifiers_v1_peer.py). Both: `sessions`
concurrent players, each playing `rounds` episodes back to back; a rollout is one model turn, so steps/s is
rollouts/s.

    python -m benchmarks.verifiers_v1_compare [--sessions 64] [--rounds 3] [--workers 2]
"""

from __future__ import annotations

import asyncio

from benchmarks.episodes import ROOT, comparison_arguments, imported_server, report, run_peer, run_players

WORD_ECHO = ROOT / "tests" / "verifiers_v1_envs" / "word_echo"
TASKS = 6


def main(argv: list[str] | None = None) -> dict:
    args = comparison_arguments(argv, __doc__, sessions=64)
    with imported_server(WORD_ECHO, "bench-word-echo", args.workers, args.sessions + 100) as served:
        ours = asyncio.run(run_players(served.url, args.sessions, args.rounds, lambda obs: (obs.split() or [""])[-1],
                                       lambda env: {"task": env % TASKS}))
        theirs = run_peer(served.python, "benchmarks.verifiers_v1_peer", str(WORD_ECHO), WORD_ECHO.name,
                          "--sessions", str(args.sessions), "--rounds", str(args.rounds))
    theirs_row = ("verifiers_runner", "Verifiers' own runner (run_episode, subprocess runtime)", theirs)
    return report(args, "Verifiers v1 null-harness rollouts", ours, theirs_row, "verifiers_v1_throughput.json",
                  unit="rollouts/s")


if __name__ == "__main__":
    main()

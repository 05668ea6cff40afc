"""Verifiers v1 throughput, one run: null-harness rollouts of a one-turn taskset (tests/verifiers_v1_envs/
word_echo) through openenv_gym, against the same taskset run by Verifiers' own runner, both with an instant
scripted policy on the same machine.

Ours: the package imported with `openenv-gym import`, served by `openenv-gym serve --workers N` in its venv, its
harness programs forked warm, each rollout's runtime a sandbox (and again unsandboxed, --no-sandbox, for what the
sandbox costs); players driven by the async vector client from this process. Theirs:
`env.run_episode` per rollout inside `env.serving()` as Verifiers' eval runner runs them, gathered on one event
loop, each harness program started by Verifiers' subprocess runtime (verifiers_v1_peer.py). Both: `sessions`
concurrent players, each playing `rounds` episodes back to back; a rollout is one model turn, so steps/s is
rollouts/s.

    python -m benchmarks.verifiers_v1_compare [--sessions 64] [--rounds 3] [--workers 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json

from benchmarks.episodes import ROOT, comparison_arguments, imported_server, report, run_peer, run_players
from openenv_gym.client.local import LocalServer

WORD_ECHO = ROOT / "tests" / "verifiers_v1_envs" / "word_echo"
TASKS = 6


def players(url: str, args: argparse.Namespace) -> dict:
    return asyncio.run(run_players(url, args.sessions, args.rounds, lambda obs: (obs.split() or [""])[-1],
                                   lambda env: {"task": env % TASKS}))


def main(argv: list[str] | None = None) -> dict:
    args = comparison_arguments(argv, __doc__, sessions=64)
    with imported_server(WORD_ECHO, "bench-word-echo", args.workers, args.sessions + 100) as served:
        with LocalServer(str(served.folder), args.workers, args.sessions + 100, "--no-sandbox") as bare:
            unsandboxed = players(bare.url, args)  # (the same import, served unconfined; the other server idles)
        sandboxed, python = players(served.url, args), served.python
    theirs = run_peer(python, "benchmarks.verifiers_v1_peer", str(WORD_ECHO), WORD_ECHO.name,
                      "--sessions", str(args.sessions), "--rounds", str(args.rounds))
    theirs_row = ("verifiers_runner", "Verifiers' own runner (run_episode, subprocess runtime)", theirs)
    result = report(args, "Verifiers v1 null-harness rollouts", sandboxed, theirs_row, "verifiers_v1_throughput.json",
                    unit="rollouts/s")
    result |= {"unsandboxed": unsandboxed, "sandbox_ratio": sandboxed["steps_per_s"] / unsandboxed["steps_per_s"]}
    print(f"  ours unsandboxed (--no-sandbox): {unsandboxed['steps_per_s']:,.2f} rollouts/s; sandboxed / unsandboxed: "
          f"{result['sandbox_ratio']:.2f}x")
    (args.out / "verifiers_v1_throughput.json").write_text(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()

"""What the import comparisons (ORS, Verifiers) share: an imported environment served on loopback, and
concurrent players driving episodes through it with the async vector client and a scripted policy."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
ENVS = Path(__file__).resolve().parent / "envs"


@dataclass
class Tally:
    """Steps and errors of a timed run, from its creation; figures() is what every comparison reports."""
    steps: int = 0
    errors: int = 0
    started: float = field(default_factory=time.perf_counter)

    def figures(self) -> dict:
        seconds = time.perf_counter() - self.started
        return {"steps": self.steps, "seconds": seconds, "steps_per_s": self.steps / seconds, "errors": self.errors}


@dataclass(frozen=True)
class Served:
    url: str  # the openenv_gym server
    python: Path  # the environment venv's python (it also has the environment's own SDK)
    folder: Path  # the imported environment's folder (its vendored source is in folder/vendor)
    pid: int = 0  # the server's process


def comparison_arguments(argv: list[str] | None, doc: str | None, sessions: int,
                         group_size: int | None = None, workers: int | None = None,
                         extra: dict[str, tuple[int, str]] | None = None) -> argparse.Namespace:
    """The command line every import comparison takes (and --group-size, for those that play groups; `extra`:
    more integer options, {name: (default, help)})."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=sessions, help="concurrent players")
    if group_size is not None:
        parser.add_argument("--group-size", type=int, default=group_size, help="plays of each task, scored together")
    parser.add_argument("--rounds", type=int, default=3, help="episodes each player plays, back to back")
    parser.add_argument("--workers", type=int, default=workers or os.cpu_count() or 1, help="server workers (ours)")
    for name, (default, meaning) in (extra or {}).items():
        parser.add_argument(f"--{name}", type=int, default=default, help=meaning)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"), help="where the JSON goes")
    return parser.parse_args(argv)


def run_peer(python: Path, module: str, *args: str) -> dict:
    """Run the other side of a comparison (a module of benchmarks/ printing one JSON line) with the environment's
    python, from the repository root."""
    done = subprocess.run([str(python), "-m", module, *args], capture_output=True, text=True, timeout=1800,
                          cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(f"{module} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


@contextlib.contextmanager
def imported_server(source: Path, name: str, workers: int, max_sessions: int, serve_args: tuple[str, ...] = (),
                    **import_options: Any) -> Iterator[Served]:
    """`openenv-gym import SOURCE` (with import_options) into a scratch home, then `openenv-gym serve` it (with
    serve_args); stopped on exit."""
    from openenv_gym.manifests.home import home

    os.environ.setdefault("OPENENV_GYM_VENVS", str(home() / "venvs"))  # reuse built venvs across runs
    with tempfile.TemporaryDirectory() as scratch:
        os.environ["OPENENV_GYM_HOME"] = scratch  # this import stays out of the user's registry
        from openenv_gym.client.local import LocalServer
        from openenv_gym.importers import import_environment
        from openenv_gym.manifests import load_manifest
        from openenv_gym.manifests.venvs import ensure_venv

        (imported,) = import_environment(source, name, Path(scratch) / "servers", **import_options)
        python = ensure_venv(load_manifest(imported.folder))
        server = LocalServer(str(imported.folder), workers, max_sessions, *serve_args)
        try:
            yield Served(server.url, python, imported.folder, server.process.pid)
        finally:
            server.stop()


async def run_players(url: str, sessions: int, rounds: int, policy: Callable[[str], Any],
                      task_of: Callable[[int], dict] | None = None) -> dict:
    """`sessions` concurrent players, each playing `rounds` episodes back to back with `policy(obs)`;
    task_of(env) gives a player's reset options. Driven EnvPool-style (send/recv): each answer is acted
    on as it arrives, so no player waits for the slowest of a batch."""
    from openenv_gym.client.vector import AsyncVectorClient

    options_of = task_of or (lambda env: None)
    episodes_left = [rounds] * sessions
    playing = [False] * sessions  # False: the env's next answer is a reset's
    async with AsyncVectorClient(url, sessions, request_timeout=600) as client:
        tally = Tally()
        for env in range(sessions):
            client.send_reset([env], seed=0, options=options_of(env))
        while client.in_flight.any():
            result = await client.recv(min_results=1)
            tally.errors += len(result.errors)
            stepping, actions = [], []
            for env, obs, ended in zip(result.ids.tolist(), result.obs, result.terminated | result.truncated,
                                       strict=True):
                if playing[env]:
                    tally.steps += 1
                    if ended:
                        playing[env] = False
                        episodes_left[env] -= 1
                        if episodes_left[env]:
                            client.send_reset([env], seed=0, options=options_of(env))
                        continue
                playing[env] = True
                stepping.append(env)
                actions.append(policy(obs))
            if stepping:
                client.send(actions, stepping)
        return tally.figures()

def report(args: argparse.Namespace, title: str, ours: dict, theirs: tuple[str, str, dict], filename: str,
           unit: str = "steps/s") -> dict:
    """Print ours against theirs (key, label, figures) with the ratio; write the JSON to args.out/filename."""
    key, label, figures = theirs
    result = {"sessions": args.sessions, "rounds": args.rounds, "workers": args.workers, "ours": ours,
              key: figures, "ratio": ours["steps_per_s"] / figures["steps_per_s"]}
    print(f"{title}, {args.sessions:,} concurrent players x {args.rounds} episodes:")
    ours_label = f"openenv_gym (imported, served by {args.workers} workers, vector client)"
    width = max(len(ours_label), len(label)) + 1
    for name, row in ((ours_label, ours), (label, figures)):
        print(f"  {name + ':':<{width}} {row['steps_per_s']:>10,.{2 if row['steps_per_s'] < 100 else 0}f} {unit}, "
              f"{row['errors']} errors")
    print(f"  ours / {key}: {result['ratio']:.2f}x")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / filename).write_text(json.dumps(result, indent=2))
    return result

"""What a sandbox costs an agent program's episode, against the same episodes unsandboxed (--no-sandbox), in one run
with the same resources on both sides (one server worker each), and what a crowd of sandboxed sessions leaves.

1. Start: `starts` episodes of one session one after the other, each a reset (its sandbox renewed, the program
   forked into it, its first model request answered as the observation); the p50 and p90 of a reset, sandboxed and
   not, and the difference. And the first reset of `fresh` sessions held open together, each in a new sandbox.
2. Throughput: `sessions` concurrent players, each playing `rounds` episodes of a program that asks the model
   twice, after a round not counted (the players' sandboxes made, the fork server up); episodes/s sandboxed over
   unsandboxed.
3. Crowd: `crowd` sandboxed sessions at once (a program each, waiting on its first request), played to their end
   and closed: errors, memory per session (proportional set size of the server and every process it started), and
   then the processes, control groups and files left.

    python -m benchmarks.sandbox [--starts 200] [--fresh 50] [--sessions 64] [--rounds 4] [--crowd 1000]
                                 [--as-user shared|subordinate]

--as-user (run as root): all of it run by an ordinary user made for it (benchmarks/ordinary_user.py), whose server
sandboxes in a user namespace of its own: without subordinate uids (every episode shares the user's) or with them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.agent_sessions import agent_env, many_programs, tree
from benchmarks.episodes import run_players
from benchmarks.measures import save_result
from benchmarks.ordinary_user import ensure_user, readable_by_all, run_as, user_venv
from openenv_gym.client.local import LocalServer
from openenv_gym.sandbox.pool import IDLE_SECONDS

GROUPS = (Path("/sys/fs/cgroup/pids/openenv-gym"), Path("/sys/fs/cgroup/memory/openenv-gym"),
          Path("/sys/fs/cgroup/openenv-gym"))


async def first_resets(url: str, sessions: int) -> list[float]:
    """Seconds the first reset of each of `sessions` new sessions took, each while the ones before stay open (so
    that no sandbox of an ended episode is there to renew: each is made)."""
    import openenv_gym

    latencies, held = [], []
    async with openenv_gym.connect(url) as conn:
        for _ in range(sessions):
            session = conn.session()
            began = time.perf_counter()
            await session.reset(seed=0)
            latencies.append(time.perf_counter() - began)
            held.append(session)
        for session in held:
            await session.close()
    return latencies


async def start_latencies(url: str, starts: int) -> list[float]:
    """Seconds each of `starts` resets took, one after the other, each episode played to its end after."""
    import openenv_gym

    latencies = []
    async with openenv_gym.connect(url) as conn:
        session = conn.session()
        for _ in range(starts):
            began = time.perf_counter()
            await session.reset(seed=0)
            latencies.append(time.perf_counter() - began)
            while not (await session.step("ok"))[2]:
                pass
        await session.close()
    return latencies


def percentiles(seconds: list[float]) -> dict:
    ordered = sorted(seconds)
    return {"p50_ms": 1000 * statistics.median(ordered), "p90_ms": 1000 * ordered[int(0.9 * (len(ordered) - 1))]}


def left_behind(server: LocalServer, baseline: dict) -> dict:
    """What the server holds beyond `baseline` (its idle self): processes, its episodes' control groups, files in the
    host's temporary folder."""
    workers = set(tree(server.process.pid))
    groups = sum(1 for folder in GROUPS if folder.is_dir() for group in folder.glob("*-*")
                 if int(group.name.split("-")[0]) in workers)
    ours = [entry.path for entry in os.scandir(tempfile.gettempdir()) if entry.name.startswith("openenv-gym")]
    found = {"processes": len(workers), "control_groups": groups,  # (files: the server's, in the host's temporary
             "files": len(ours) + sum(len(folders) + len(files)      # folder; the machine's other users' come and go)
                                      for path in ours for _, folders, files in os.walk(path))}
    return {key: value - baseline.get(key, 0) for key, value in found.items()}


def sandboxes(server: LocalServer) -> int:
    """How many sandboxes the server holds (their bubblewrap processes: two each)."""
    def command(pid: int) -> str:
        try:
            return Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:  # (it ended)
            return ""
    return sum(1 for pid in tree(server.process.pid) if command(pid) == "bwrap")


def measure(folder: Path, sandboxed: bool, args: argparse.Namespace) -> dict:
    extra = () if sandboxed else ("--no-sandbox",)
    with LocalServer(str(folder), 1, max(args.sessions, args.crowd) + 10, *extra) as server:
        start = asyncio.run(start_latencies(server.url, args.starts))
        fresh = asyncio.run(first_resets(server.url, args.fresh))

        async def play() -> dict:
            await run_players(server.url, args.sessions, 1, lambda obs: "ok")  # (the round not counted)
            return await run_players(server.url, args.sessions, args.rounds, lambda obs: "ok")
        players = asyncio.run(play())
        figures = {"start": percentiles(start), "new_session_start": percentiles(fresh),
                   "episodes_per_s": players["steps_per_s"] / 2, "errors": players["errors"]}
        if sandboxed:
            deadline = time.monotonic() + 3 * IDLE_SECONDS + 5  # (the sandboxes kept for the players' next
            while sandboxes(server) and time.monotonic() < deadline:  # episodes, closed)
                time.sleep(0.1)
            baseline = left_behind(server, {})
            figures["crowd"] = asyncio.run(many_programs(server, args.crowd))
            deadline = time.monotonic() + 30
            while (left := left_behind(server, baseline)) != {"processes": 0, "control_groups": 0, "files": 0} \
                    and time.monotonic() < deadline:
                time.sleep(0.1)
            figures["left_after_the_crowd"] = left
    return figures


USERS = {"shared": ("openenv-bench-shared", None), "subordinate": ("openenv-bench-subuid", "300000:65536")}


def measure_both(args: argparse.Namespace) -> dict:
    with tempfile.TemporaryDirectory() as scratch:
        folder = agent_env(Path(scratch) / "two_turns", 2)
        unsandboxed = measure(folder, False, args)
        sandboxed = measure(folder, True, args)
    return {"sandboxed": sandboxed, "unsandboxed": unsandboxed,
            "added_start_p50_ms": sandboxed["start"]["p50_ms"] - unsandboxed["start"]["p50_ms"],
            "added_new_session_start_p50_ms": sandboxed["new_session_start"]["p50_ms"]
            - unsandboxed["new_session_start"]["p50_ms"],
            "episodes_ratio": sandboxed["episodes_per_s"] / unsandboxed["episodes_per_s"]}


def measure_as_user(mode: str, argv: list[str]) -> dict:
    """measure_both() run by an ordinary user (made here: we are root), in a venv of its own."""
    name, subordinate = USERS[mode]
    user = ensure_user(name, subordinate)
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        venv = user_venv(folder)
        shutil.copytree(Path(__file__).parent, folder / "benchmarks", ignore=shutil.ignore_patterns("results"))
        home = folder / "home"
        home.mkdir()
        readable_by_all(folder)
        shutil.chown(home, user.pw_uid, user.pw_gid)
        done = run_as(name, [str(venv / "bin" / "python"), "-m", "benchmarks.sandbox", "--print-json", *argv],
                      {"OPENENV_GYM_HOME": str(home), "TMPDIR": str(home)}, timeout=3600, cwd=folder)
    if done.returncode != 0:
        raise RuntimeError(f"the benchmark run as {name} failed:\n{done.stderr[-3000:]}")
    return {"user": name, **json.loads(done.stdout.strip().splitlines()[-1])}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--starts", type=int, default=200)
    parser.add_argument("--fresh", type=int, default=50)
    parser.add_argument("--sessions", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--crowd", type=int, default=1000)
    parser.add_argument("--as-user", choices=sorted(USERS), default=None)
    parser.add_argument("--print-json", action="store_true", help=argparse.SUPPRESS)  # (the user's run's answer)
    args = parser.parse_args(argv)
    if args.print_json:
        print(json.dumps(measure_both(args)))
        return {}
    if args.as_user:
        forwarded = [f"--{key}={getattr(args, key)}" for key in ("starts", "fresh", "sessions", "rounds", "crowd")]
        result = measure_as_user(args.as_user, forwarded)
    else:
        result = measure_both(args)
    sandboxed, unsandboxed = result["sandboxed"], result["unsandboxed"]
    who = f" (served by {result['user']}, an ordinary user: {args.as_user} uids)" if args.as_user else ""
    print(f"An agent program's episode, sandboxed and not (one server worker each){who}:")
    for label, row in (("sandboxed", sandboxed), ("unsandboxed", unsandboxed)):
        print(f"  {label + ':':<13} reset p50 {row['start']['p50_ms']:.1f} ms (p90 {row['start']['p90_ms']:.1f}), "
              f"{row['episodes_per_s']:,.0f} episodes/s with {args.sessions} players, {row['errors']} errors")
    print(f"  a new session's first reset (a new sandbox): p50 {sandboxed['new_session_start']['p50_ms']:.1f} ms "
          f"sandboxed, {unsandboxed['new_session_start']['p50_ms']:.1f} ms not")
    print(f"  the sandbox adds {result['added_start_p50_ms']:.1f} ms to a reset (p50), "
          f"{result['added_new_session_start_p50_ms']:.1f} ms to a new session's; episodes/s sandboxed / "
          f"unsandboxed: {result['episodes_ratio']:.2f}x")
    crowd = sandboxed["crowd"]
    print(f"{crowd['programs']:,} sandboxed sessions at once: {crowd['errors']} errors, "
          f"{crowd['memory_per_session_mib']:.1f} MiB per session; left after they closed: "
          f"{sandboxed['left_after_the_crowd']}")
    save_result(f"sandbox_user_{args.as_user}" if args.as_user else "sandbox", result)
    return result


if __name__ == "__main__":
    main()

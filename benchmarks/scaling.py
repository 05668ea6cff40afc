"""Past one server, on a real Ray cluster on this machine (two node processes, one CPU each, on loopback; see
docs/scaling.md). Run: make bench, or python -m benchmarks.scaling.

- throughput of a CPU-bound env (0.5 ms of Python per step) with 2 server actors against 1, in alternating rounds
  on fresh actors (goal >= 1.7x);
- what one session costs, with echo on 2 actors: client and server CPU per 1,000 session-steps, bytes on the wire
  per session-step, client and server memory per session;

Killed servers, on Ray and off, are benchmarks.recovery's.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

import uvloop

import openenv_gym.ray as on_ray
from benchmarks.capacity import steps_per_second
from benchmarks.measures import cpu_seconds, loopback_bytes, save_result
from benchmarks.ray_cluster import local_cluster
from openenv_gym.cli.procinfo import tree_rss
from openenv_gym.client.vector import AsyncVectorClient

HERE = Path(__file__).parent
CPU_ENV = str(HERE / "envs" / "cpu")


def cpu_throughput(num_servers: int, sessions: int, seconds: float) -> float:
    with on_ray.serve(CPU_ENV, num_servers=num_servers) as servers:
        return uvloop.run(steps_per_second(servers, sessions, seconds))


def scaling(rounds: int, sessions: int, seconds: float) -> dict:
    rates: dict[int, list[float]] = {1: [], 2: []}
    for _ in range(rounds):
        for num_servers in (1, 2):
            rates[num_servers].append(cpu_throughput(num_servers, sessions, seconds))
    one, two = statistics.median(rates[1]), statistics.median(rates[2])
    return {"sessions": sessions, "steps_per_s_1_actor": one, "steps_per_s_2_actors": two, "ratio": two / one,
            "rounds": rates}


class Meter:
    """CPU of this process (the client) and of the servers, and bytes over loopback, during a phase."""

    def __init__(self, server_pids: list[int]) -> None:
        self.server_pids = server_pids

    def __enter__(self) -> Meter:
        self.start = (time.process_time(), self._server_cpu(), loopback_bytes(), time.perf_counter())
        return self

    def __exit__(self, *exc: object) -> None:
        end = (time.process_time(), self._server_cpu(), loopback_bytes(), time.perf_counter())
        spent = [b - a for a, b in zip(self.start, end, strict=True)]
        self.client_cpu, self.server_cpu, self.wire_bytes, self.seconds = spent

    def _server_cpu(self) -> float:
        return sum(map(cpu_seconds, self.server_pids))

    def per_session_step(self, session_steps: int) -> dict:
        return {"session_steps_per_s": session_steps / self.seconds,
                "client_cpu_ms_per_1000": self.client_cpu / session_steps * 1e6,
                "server_cpu_ms_per_1000": self.server_cpu / session_steps * 1e6,
                "wire_bytes_per_session_step": self.wire_bytes / session_steps}


def session_costs(sessions: int, steps: int) -> dict:
    """Echo on 2 actors, stepped in lock-step (one `steps` request per connection) and one env at a time (a send
    per env, answers as they come: how the rollout stream drives sessions)."""
    with on_ray.serve("echo", num_servers=2) as servers:
        server_pids = [where["server_pid"] for where in servers.where()]

        async def measure() -> dict:
            me = os.getpid()
            client_rss, server_rss = tree_rss(me), sum(map(tree_rss, server_pids))
            errors = 0
            async with AsyncVectorClient(servers, sessions, request_timeout=600) as client:
                await client.reset(seed=0, options={"max_steps": 10**9})
                await client.step(["x"] * sessions)
                held = {"client_bytes_per_session": (tree_rss(me) - client_rss) / sessions,
                        "server_bytes_per_session": (sum(map(tree_rss, server_pids)) - server_rss) / sessions}
                with Meter(server_pids) as lock_step:
                    for k in range(steps):
                        errors += len((await client.step([f"step {k}"] * sessions)).errors)
                with Meter(server_pids) as one_by_one:
                    for k in range(steps):
                        for env in range(sessions):
                            client.send([f"one {k}"], ids=[env])
                        answered = 0
                        while answered < sessions:
                            result = await client.recv(min_results=1)
                            answered += len(result.ids)
                            errors += len(result.errors)
            return {"sessions": sessions, "steps": steps, "errors": errors, **held,
                    "lock_step": lock_step.per_session_step(sessions * steps),
                    "one_by_one": one_by_one.per_session_step(sessions * steps)}

        return uvloop.run(measure())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3, help="alternating 1-actor / 2-actor rounds (median)")
    parser.add_argument("--seconds", type=float, default=4.0, help="length of each throughput round")
    parser.add_argument("--cpu-sessions", type=int, default=256)
    parser.add_argument("--sessions", type=int, default=20_000, help="echo sessions for the per-session costs")
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()

    with local_cluster():
        results = {"scaling": scaling(args.rounds, args.cpu_sessions, args.seconds)}
        s = results["scaling"]
        print(f"CPU-bound env, {s['sessions']} sessions: {s['steps_per_s_1_actor']:,.0f} steps/s on 1 actor, "
              f"{s['steps_per_s_2_actors']:,.0f} on 2: {s['ratio']:.2f}x (median of {args.rounds} rounds)")
        results["session_costs"] = c = session_costs(args.sessions, args.steps)
        print(f"echo, {c['sessions']:,} sessions on 2 actors ({c['errors']} errors); "
              f"{c['client_bytes_per_session']:,.0f} client and {c['server_bytes_per_session']:,.0f} server bytes "
              "per session; per 1,000 session-steps:")
        for way in ("lock_step", "one_by_one"):
            w = c[way]
            print(f"  {way.replace('_', '-'):11} client CPU {w['client_cpu_ms_per_1000']:.2f} ms, server CPU "
                  f"{w['server_cpu_ms_per_1000']:.2f} ms, {w['wire_bytes_per_session_step']:.0f} wire bytes per "
                  f"session-step, {w['session_steps_per_s']:,.0f} session-steps/s")
    save_result("scaling", results)


if __name__ == "__main__":
    main()

"""Servers killed under load: a Gymnasium vector env of echo sessions over two servers steps on while one server is
killed, round after round, with every core kept busy by CPU burners. Run: make bench, or
python -m benchmarks.recovery [--rounds 20] [--num-envs 1024] [--kinds plain ray].

- plain: two `openenv-gym serve` processes given as a list of URLs; the victim is killed by PID (SIGKILL: no close
  frame) and started again on its port after the round, as a process supervisor would;
- ray: two server actors of openenv_gym.ray on a local two-node cluster; the victim actor is killed with ray.kill and
  Ray restarts it elsewhere.

The cores are busy from just before each kill until every env steps again; between rounds, the victim comes back
(and takes its share of the envs again) with the cores idle.

Each round reports the seconds from the kill until every env has stepped again (goal: within 10 s), the exceptions
step() raised (goal: none), the env steps that reported the loss, and the reset tries that failed and were retried.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any
from urllib.parse import urlsplit

import gymnasium as gym
import httpx
import numpy as np

import openenv_gym  # noqa: F401  (registers openenv/echo)
from benchmarks.measures import save_result
from openenv_gym.client.local import LocalServer

KILL_AFTER = 0.3  # seconds of stepping before the kill, which lands in the middle of a step
MAX_STEPS = 8  # episodes end now and then, so envs move back to a restarted server as they reset
BURN = "import sys, time\nend = time.monotonic() + float(sys.argv[1])\nwhile time.monotonic() < end: pass\n"


@contextlib.contextmanager
def cpu_burners(seconds: float, count: int | None = None) -> Iterator[None]:
    """A busy process per core (or `count`), each ending by itself after `seconds` at the latest."""
    count = count or os.cpu_count() or 1
    burners = [subprocess.Popen([sys.executable, "-c", BURN, str(seconds)]) for _ in range(count)]
    try:
        yield
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()


def sessions_on(url: str) -> int:
    return httpx.get(url.replace("ws://", "http://", 1) + "/healthz", timeout=10).json()["sessions"]


def through_a_kill(envs: gym.vector.VectorEnv, kill: Callable[[], None], deadline: float,
                   busy: bool) -> dict[str, Any]:
    """Step `envs` lock-step; `kill` runs on another thread in the middle of a step. Step on until every env has
    echoed its action since the loss was seen, or `deadline` seconds after the kill. With `busy`, every core is
    kept busy from before the kill until then."""
    with cpu_burners(seconds=2 * deadline) if busy else contextlib.nullcontext():
        return _through_a_kill(envs, kill, deadline)


def _through_a_kill(envs: gym.vector.VectorEnv, kill: Callable[[], None], deadline: float) -> dict[str, Any]:
    killed: list[float] = []  # when the kill began
    dead = threading.Event()  # the kill is done: the victim's sessions can no longer answer

    def killer() -> None:
        killed.append(time.perf_counter())
        kill()
        dead.set()

    timer = threading.Timer(KILL_AFTER, killer)
    timer.start()
    waiting = np.ones(envs.num_envs, dtype=bool)  # envs that have not stepped again since the loss
    lost = retries = steps = 0
    exceptions: list[str] = []
    try:
        while not killed or time.perf_counter() - killed[0] < deadline:
            actions = [f"{steps}-{i}" for i in range(envs.num_envs)]
            steps += 1
            try:
                obs, _, _, _, infos = envs.step(actions)
            except Exception as exc:  # the loop goes on, as a trainer's would; counted, since the goal is none
                exceptions.append(f"{type(exc).__name__}: {exc}")
                continue
            failed = infos.get("_error", np.zeros(envs.num_envs, dtype=bool))
            lost += int(failed.sum())
            if "_retries" in infos:
                retries += int(infos["retries"][infos["_retries"]].sum())
            if lost or retries:  # the loss was seen (by a step, or by resets that were then tried again)
                waiting &= ~np.fromiter((o == a for o, a in zip(obs, actions, strict=True)), bool, len(actions))
                waiting |= failed
                if dead.is_set() and not waiting.any():
                    return {"seconds": time.perf_counter() - killed[0], "lost_env_steps": lost, "retries": retries,
                            "exceptions": exceptions, "steps": steps}
    finally:
        timer.join()
    return {"seconds": None, "lost_env_steps": lost, "retries": retries, "exceptions": exceptions, "steps": steps}


def step_until(envs: gym.vector.VectorEnv, done: Callable[[], bool], deadline: float) -> float | None:
    """Step until `done()`; the seconds it took, or None after `deadline` seconds."""
    began = time.perf_counter()
    while time.perf_counter() - began < deadline:
        envs.step(["x"] * envs.num_envs)
        if done():
            return time.perf_counter() - began
    return None


def plain(rounds: int, num_envs: int, deadline: float, busy: bool = True) -> list[dict[str, Any]]:
    """Two `openenv-gym serve` servers given as a list of URLs; each round kills one by PID and starts it again."""
    servers = [LocalServer("echo", 1, 100_000), LocalServer("echo", 1, 100_000)]
    urls = [server.url for server in servers]
    results = []
    try:
        envs = gym.make_vec("openenv/echo", num_envs=num_envs, base_url=urls)
        envs.reset(seed=0, options={"max_steps": MAX_STEPS})
        for k in range(rounds):
            victim = servers[k % 2]

            def kill(victim: LocalServer = victim) -> None:
                victim.process.kill()
                victim.process.wait()

            results.append(through_a_kill(envs, kill, deadline, busy))
            servers[k % 2] = LocalServer("echo", 1, 100_000, port=urlsplit(victim.url).port)  # back on its port
            back = partial(lambda url: sessions_on(url) > 0, urls[k % 2])
            results[-1]["back_with_sessions_s"] = step_until(envs, back, deadline)
        envs.close()
    finally:
        for server in servers:
            server.stop()
    return results


def on_ray(rounds: int, num_envs: int, deadline: float, busy: bool = True) -> list[dict[str, Any]]:
    """Two server actors on a Ray cluster (ray.init done); each round kills one and Ray restarts it. The restart
    is waited for with the cores idle: under this load Ray takes about 26 s to restart an actor, which is Ray's
    time, not the envs'."""
    import openenv_gym.ray as on_ray
    from benchmarks.ray_cluster import ray

    results = []
    with on_ray.serve("echo", num_servers=2) as servers:
        envs = gym.make_vec("openenv/echo", num_envs=num_envs, base_url=servers)
        envs.reset(seed=0, options={"max_steps": MAX_STEPS})
        for k in range(rounds):
            victim = servers.where()[k % 2]

            def kill(k: int = k, pid: int = victim["server_pid"]) -> None:
                ray.kill(servers.actors[k % 2], no_restart=False)
                while _alive(pid):  # Ray ends the server process shortly after the actor
                    time.sleep(0.01)

            results.append(through_a_kill(envs, kill, deadline, busy))

            def back(k: int = k, old: str = victim["url"]) -> bool:
                urls = servers.urls()
                return len(urls) == 2 and old not in urls and sessions_on(urls[k % 2]) > 0

            results[-1]["back_with_sessions_s"] = step_until(envs, back, deadline)
        envs.close()
    return results


def _alive(pid: int) -> bool:
    try:
        stat = open(f"/proc/{pid}/stat").read()  # noqa: SIM115
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _seconds(value: float | None) -> str:
    return "never" if value is None else f"{value:.2f} s"


def summary(kind: str, results: list[dict[str, Any]]) -> dict[str, Any]:
    times = [r["seconds"] for r in results if r["seconds"] is not None]
    back = [r["back_with_sessions_s"] for r in results if r["back_with_sessions_s"] is not None]
    return {"kind": kind, "rounds": len(results), "recovered": len(times), "back_with_sessions": len(back),
            "back_with_sessions_s_p50": statistics.median(back) if back else None,
            "exceptions_from_step": sum(len(r["exceptions"]) for r in results),
            "seconds_p50": statistics.median(times) if times else None, "seconds_max": max(times, default=None),
            "lost_env_steps": sum(r["lost_env_steps"] for r in results),
            "retries": sum(r["retries"] for r in results), "rounds_detail": results}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--num-envs", type=int, default=1024)
    parser.add_argument("--kinds", nargs="+", choices=("plain", "ray"), default=["plain", "ray"])
    parser.add_argument("--deadline", type=float, default=60.0, help="give up on a round after this long")
    parser.add_argument("--no-burn", action="store_true", help="leave the cores idle")
    args = parser.parse_args()
    results = {}
    for kind in args.kinds:
        with contextlib.ExitStack() as stack:
            if kind == "ray":
                from benchmarks.ray_cluster import local_cluster
                stack.enter_context(local_cluster())
            play = plain if kind == "plain" else on_ray
            results[kind] = s = summary(kind, play(args.rounds, args.num_envs, args.deadline, not args.no_burn))
        print(f"{kind}: {s['rounds']} servers killed under {args.num_envs} envs"
              f"{'' if args.no_burn else ' with every core busy'}: {s['recovered']} recovered, every env stepping "
              f"again after {_seconds(s['seconds_p50'])} (median), {_seconds(s['seconds_max'])} (slowest); "
              f"{s['exceptions_from_step']} exceptions from step; {s['lost_env_steps']} env steps reported a loss; "
              f"{s['retries']} reset tries retried; the victim served its share of the envs again after "
              f"{_seconds(s['back_with_sessions_s_p50'])} (median, cores idle)")
    save_result("recovery", results)


if __name__ == "__main__":
    main()

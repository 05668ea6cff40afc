"""A bystander's step latency while another episode on the same server attacks its own sandbox (issue 37, item 5).

    python -m benchmarks.sandbox_abuse [--seconds 5] [--attacks fork_bomb,kill_all,...]   # part of `make bench`

One server of the shell agent (tests/sandbox_envs/shell: each model reply is run as a shell command in the episode's
sandbox; 64 processes, 512 MiB, 16 MiB of disk), one worker. The bystander, a process of its own (so that the
attacker's client does not slow it), steps one session with `echo n` and times each step: first alone (quiet), then
while an attacker plays episodes of one attack after the other, for as long as the bystander measures (each episode:
a reset, the attack's commands, a hold while what it started runs, the close). Reported per attack: the bystander's
p50 and p99 and their ratio to quiet, its errors (a wrong answer or a failed step), and the attacker's episodes.
The goal (the issue's): the bystander's p99 unchanged, and no error.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shlex
import sys
import time

import numpy as np

from benchmarks.episodes import ROOT
from benchmarks.measures import save_result

SHELL = ROOT / "tests" / "sandbox_envs" / "shell"
PYTHON = sys.executable  # the server's interpreter, the env's: its venv is shown (read-only) in every sandbox
STEP_TIMEOUT = 60.0


def python(code: str) -> str:
    return f"{PYTHON} -c {shlex.quote(code)}"


# opens files until its bound, then forks 40 children that hold them all too
HOARD = ("import os, time\nfds = []\ntry:\n    while True:\n        fds.append(os.open('/dev/null', os.O_RDONLY))\n"
         "except OSError:\n    pass\nfor _ in range(40):\n    if os.fork() == 0:\n        break\ntime.sleep(3)\n")
# name -> (its commands, one step each; seconds it holds after them, what it started still running)
ATTACKS: dict[str, tuple[list[str], float]] = {
    "fork_bomb": (["bash -c ':(){ :|:& };:' >/dev/null 2>&1; echo bombed"], 2.0),
    "kill_all": (["kill -9 -1; echo survived"], 0.0),
    "rm_rf": (["rm -rf / ~ 2>/dev/null; timeout 8 rm -rf --no-preserve-root / 2>/dev/null; echo $?"], 0.0),
    "fill_disk": (["for d in . /tmp /dev/shm; do dd if=/dev/zero of=$d/big bs=1M 2>/dev/null; done; echo full"], 0.0),
    "memory": ([python("b = bytearray(1 << 30)"),
                "for i in 1 2 3; do " + python('b = b"x" * (300 << 20)') + " & done; wait; echo done"], 0.0),
    "open_files": ([f"({python(HOARD)} >/dev/null 2>&1 &); echo started"], 2.0),
    "many_files": ([python("import time\nend, n = time.monotonic() + 2, 0\nwhile time.monotonic() < end:\n"
                           "    open(f'f{n}', 'w').close()\n    n += 1\nprint(n)")], 0.0),
    "port_scan": ([python("import socket\nfor port in range(1, 65536):\n    with socket.socket() as s:\n"
                          "        s.settimeout(0.05)\n        s.connect_ex(('127.0.0.1', port))\n"
                          "for far in ('192.0.2.1', '1.1.1.1'):\n    with socket.socket() as s:\n"
                          "        s.settimeout(1)\n        s.connect_ex((far, 80))\nprint('scanned')")], 0.0),
    "read_others": (["cat /proc/1/environ /proc/*/environ /proc/*/root/tmp/work/* /tmp/work/* 2>&1 | tail -3; "
                     "ls -la /tmp /dev/shm /proc"], 0.0),
    "ignore_sigterm": (["(trap '' TERM HUP; exec sleep 600) >/dev/null 2>&1 & "
                        "setsid sh -c \"trap '' TERM HUP INT; sleep 700\" >/dev/null 2>&1 & echo started"], 1.0),
}


# -- the bystander (a process of its own) -------------------------------------------------------------------------

async def _bystander(url: str, seconds: float) -> dict:
    import openenv_gym

    latencies: list[float] = []
    errors: list[str] = []
    async with openenv_gym.connect(url) as conn:
        session = conn.session()
        await session.reset(options={"index": 0})
        for n in range(20):  # warm
            await session.step(f"echo {n}")
        print("ready", flush=True)
        deadline, n = time.perf_counter() + seconds, 0
        while time.perf_counter() < deadline:
            n += 1
            began = time.perf_counter()
            try:
                obs, _, terminated, truncated, info = await asyncio.wait_for(session.step(f"echo {n}"), STEP_TIMEOUT)
            except Exception as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
                break
            latencies.append(time.perf_counter() - began)
            if obs != f"exit 0\n{n}\n" or terminated or truncated or "error" in info:
                errors.append(f"echo {n} -> {obs!r} {info.get('error')}")
                if terminated or truncated:
                    await session.reset(options={"index": 0})
        await session.close()
    return {"latencies": latencies, "errors": errors}


def figures(measured: dict) -> dict:
    ms = np.asarray(measured["latencies"]) * 1000
    return {"steps": len(ms), "p50_ms": float(np.percentile(ms, 50)), "p99_ms": float(np.percentile(ms, 99)),
            "max_ms": float(ms.max()), "errors": len(measured["errors"]), "first_errors": measured["errors"][:3]}


# -- the attacker --------------------------------------------------------------------------------------------------

async def attack_once(url: str, commands: list[str], hold: float) -> dict:
    """One attacking episode: its steps, whether it ended (its program killed), and an error of the server's."""
    import openenv_gym

    async with openenv_gym.connect(url) as conn:
        session = conn.session()
        try:
            await session.reset(options={"index": 0})
            for command in commands:
                *_, terminated, truncated, _ = await asyncio.wait_for(session.step(command), STEP_TIMEOUT)
                if terminated or truncated:
                    return {"ended": True}
            await asyncio.sleep(hold)
            return {"ended": False}
        finally:
            await session.close()


async def measure(url: str, seconds: float, attack: tuple[list[str], float] | None) -> dict:
    """The bystander's figures over `seconds`, with `attack` played over and over meanwhile (None: quiet)."""
    bystander = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "benchmarks.sandbox_abuse", "--bystander", url, "--seconds", str(seconds),
        stdout=asyncio.subprocess.PIPE, cwd=ROOT)
    assert bystander.stdout is not None
    ready = await bystander.stdout.readline()
    if ready != b"ready\n":
        raise RuntimeError(f"the bystander did not start: {ready!r}")
    finished = asyncio.ensure_future(bystander.communicate())
    rounds, ended, failures = 0, 0, []
    while attack is not None and not finished.done():
        try:
            outcome = await attack_once(url, *attack)
            rounds, ended = rounds + 1, ended + outcome["ended"]
        except Exception as exc:  # (the attacker's own failure: counted, the bystander's figures are what matter)
            failures.append(f"{type(exc).__name__}: {exc}")
            await asyncio.sleep(0.1)
    stdout, _ = await finished
    result = figures(json.loads(stdout))
    if attack is not None:
        result |= {"attack_episodes": rounds, "attack_episodes_ended": ended, "attacker_failures": failures[:3]}
    return result


def run(seconds: float, names: list[str]) -> dict:
    from openenv_gym.client.local import LocalServer

    with LocalServer(str(SHELL), 1, 100) as server:
        quiet = asyncio.run(measure(server.url, seconds, None))
        attacks = {}
        for name in names:
            attacks[name] = asyncio.run(measure(server.url, seconds, ATTACKS[name]))
            attacks[name] |= {"p50_ratio": attacks[name]["p50_ms"] / quiet["p50_ms"],
                              "p99_ratio": attacks[name]["p99_ms"] / quiet["p99_ms"], "server_alive": server.alive}
            if not server.alive:
                break
        quiet_after = asyncio.run(measure(server.url, seconds, None)) if server.alive else None
    return {"seconds": seconds, "quiet": quiet, "attacks": attacks, "quiet_after": quiet_after}


def main(argv: list[str] | None = None) -> dict | None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=5.0, help="the bystander's measurement, quiet and per attack")
    parser.add_argument("--attacks", default=",".join(ATTACKS),
                        help=f"a comma-separated subset of {', '.join(ATTACKS)}")
    parser.add_argument("--bystander", metavar="URL", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.bystander:
        print(json.dumps(asyncio.run(_bystander(args.bystander, args.seconds))))
        return None
    names = [name for name in args.attacks.split(",") if name]
    unknown = sorted(set(names) - set(ATTACKS))
    if unknown:
        parser.error(f"unknown attacks {unknown}: choose among {', '.join(ATTACKS)}")
    result = run(args.seconds, names)
    save_result("sandbox_abuse", result)
    quiet = result["quiet"]
    print(f"A bystander session's step (`echo n`, one worker) while another episode attacks its sandbox, "
          f"{args.seconds:g} s each:")
    print(f"  {'quiet':<15} p50 {quiet['p50_ms']:6.1f} ms           p99 {quiet['p99_ms']:6.1f} ms           max "
          f"{quiet['max_ms']:7.1f} ms   {quiet['steps']:5} steps, {quiet['errors']} errors")
    for name, row in result["attacks"].items():
        print(f"  {name:<15} p50 {row['p50_ms']:6.1f} ms ({row['p50_ratio']:4.2f}x)   p99 {row['p99_ms']:6.1f} ms "
              f"({row['p99_ratio']:4.2f}x)   max {row['max_ms']:7.1f} ms   {row['steps']:5} steps, "
              f"{row['errors']} errors; {row['attack_episodes']} attacking episodes "
              f"({row['attack_episodes_ended']} ended by the attack)"
              + ("" if row["server_alive"] else "; THE SERVER DIED"))
    if result["quiet_after"] is not None:
        after = result["quiet_after"]
        print(f"  {'quiet, after':<15} p50 {after['p50_ms']:6.1f} ms           p99 {after['p99_ms']:6.1f} ms           "
              f"max {after['max_ms']:7.1f} ms   {after['steps']:5} steps, {after['errors']} errors")
    return result


if __name__ == "__main__":
    main()

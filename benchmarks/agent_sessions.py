"""Agent programs stepped through the model endpoint: what a turn costs over a plain native step, and how many
programs one server holds at once.

1. Turns: `sessions` concurrent sessions of an agent env whose program (a function, forked warm) asks the model
   `turns` times over one kept-alive HTTP connection, against the same number of sessions of the shipped echo
   env stepped natively, one server worker each, the same client (a step per session in flight, each answered
   as it arrives). A turn's cost is the CPU time the server side spends on it (the server process, its fork
   server and the programs); the endpoint adds the difference. Latencies are reported too: at this many
   sessions they are the queue of a saturated machine, not the cost of a turn.
2. Sessions at once: `programs` sessions reset together (a program each, waiting on its first model request),
   then stepped to their end; errors counted, and the memory of the server, its fork server and every program
   (proportional set size, so pages the forks share are counted once) divided by the sessions.

    python -m benchmarks.agent_sessions [--sessions 256] [--turns 100] [--programs 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import textwrap
import time
from pathlib import Path

from benchmarks.measures import save_result
from openenv_gym.client.local import LocalServer
from openenv_gym.client.vector import AsyncVectorClient

PROGRAM = '''
    import http.client, json, urllib.parse

    def run(prompt, base_url, api_key, model, turns=TURNS):
        address = urllib.parse.urlsplit(base_url)
        connection = http.client.HTTPConnection(address.hostname, address.port)
        messages = [{"role": "user", "content": prompt}]
        for _ in range(turns):
            connection.request("POST", address.path + "/chat/completions", json.dumps(
                {"model": model, "messages": messages[-2:]}), {"Content-Type": "application/json"})
            reply = json.loads(connection.getresponse().read())["choices"][0]["message"]["content"]
            messages += [{"role": "assistant", "content": reply}, {"role": "user", "content": "again"}]
        return {"reward": 1.0}
'''


def agent_env(folder: Path, turns: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "agent.py").write_text(textwrap.dedent(PROGRAM).replace("TURNS", str(turns)))
    (folder / "tasks.jsonl").write_text('{"prompt": "go"}\n')
    (folder / "openenv.toml").write_text(f'name = "{folder.name}"\nkind = "agent"\nentry = "agent:run"\n'
                                         'tasks = "tasks.jsonl"\npreload = ["http.client", "json"]\n')
    return folder


def cpu_seconds(root: int) -> float:
    """CPU time of a process tree (what it used, and what its reaped children used)."""
    ticks = 0
    for pid in tree(root):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks += sum(int(value) for value in fields[11:15])  # utime, stime, cutime, cstime
    return ticks / os.sysconf("SC_CLK_TCK")


async def turn_latency(url: str, sessions: int, turns: int) -> dict:
    """Every session steps until its episode ends (`turns` steps), one step in flight each; the mean latency of
    a step, measured per answer."""
    async with AsyncVectorClient(url, sessions, request_timeout=600) as client:
        await client.reset(seed=0)
        sent = [0.0] * sessions
        left = [turns] * sessions
        latencies, errors = [], 0
        started = time.perf_counter()
        for env in range(sessions):
            sent[env] = time.perf_counter()
        client.send(["ok"] * sessions, list(range(sessions)))
        resetting: set[int] = set()  # an env whose episode ended before its turns: its next answer is a reset's
        while client.in_flight.any():
            result = await client.recv(min_results=1)
            now = time.perf_counter()
            errors += len(result.errors)
            again = []
            for env, ended in zip(result.ids.tolist(), result.terminated | result.truncated, strict=True):
                if env in resetting:
                    resetting.discard(env)
                else:
                    latencies.append(now - sent[env])
                    left[env] -= 1
                    if left[env] > 0 and ended:
                        resetting.add(env)
                        client.send_reset([env], seed=0)
                        continue
                if left[env] > 0:
                    sent[env] = now
                    again.append(env)
            if again:
                client.send(["ok"] * len(again), again)
        seconds = time.perf_counter() - started
    return {"turns": len(latencies), "seconds": seconds, "turns_per_s": len(latencies) / seconds,
            "mean_latency_ms": 1000 * sum(latencies) / len(latencies), "errors": errors}


def pss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def tree(root: int) -> list[int]:
    """root and every process below it."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += children.get(pid, [])
    return found


async def many_programs(server: LocalServer, programs: int) -> dict:
    async with AsyncVectorClient(server.url, programs, request_timeout=600) as client:
        started = time.perf_counter()
        reset = await client.reset(seed=0)
        reset_seconds = time.perf_counter() - started
        pids = tree(server.process.pid)
        memory_kib = sum(pss_kib(pid) for pid in pids)
        errors = len(reset.errors)
        live, steps = [env for env in range(programs) if env not in reset.errors], 0
        while live:
            result = await client.step(["ok"] * len(live), live)
            errors += sum(1 for info in result.infos if info.get("error"))
            steps += len(live)
            live = [env for env, ended in zip(result.ids.tolist(), result.terminated | result.truncated, strict=True)
                    if not ended and env not in result.errors]
    return {"programs": programs, "processes": len(pids), "reset_seconds": reset_seconds, "steps": steps,
            "errors": errors, "memory_mib": memory_kib / 1024, "memory_per_session_mib": memory_kib / 1024 / programs}


def turns_of(env: str, sessions: int, turns: int) -> dict:
    with LocalServer(env, 1, sessions + 10) as server:
        before = cpu_seconds(server.process.pid)
        figures = asyncio.run(turn_latency(server.url, sessions, turns))
        figures["cpu_ms_per_turn"] = 1000 * (cpu_seconds(server.process.pid) - before) / figures["turns"]
    return figures


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=256)
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--programs", type=int, default=1000)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        agent = turns_of(str(agent_env(Path(scratch) / "looper", args.turns)), args.sessions, args.turns)
        native = turns_of("echo", args.sessions, args.turns)
        with LocalServer(str(agent_env(Path(scratch) / "two_turns", 2)), 1, args.programs + 10) as server:
            crowd = asyncio.run(many_programs(server, args.programs))
    added = agent["cpu_ms_per_turn"] - native["cpu_ms_per_turn"]
    result = {"sessions": args.sessions, "turns": args.turns, "agent": agent, "native": native,
              "added_ms_per_turn": added, "crowd": crowd}
    print(f"{args.sessions} sessions x {args.turns} turns, one worker each:")
    for label, row in (("agent program through the endpoint", agent), ("echo, native steps", native)):
        print(f"  {label + ':':<36}{row['turns_per_s']:>9,.0f} turns/s, {row['cpu_ms_per_turn']:.3f} ms of CPU a "
              f"turn, mean latency {row['mean_latency_ms']:.2f} ms, {row['errors']} errors")
    print(f"  the endpoint adds {added:.3f} ms of CPU per turn")
    print(f"{crowd['programs']} sessions at once, a program each: reset in {crowd['reset_seconds']:.1f} s, "
          f"{crowd['errors']} errors, {crowd['memory_mib']:,.0f} MiB in {crowd['processes']} processes "
          f"({crowd['memory_per_session_mib']:.1f} MiB per session)")
    save_result("agent_sessions", result)
    return result


if __name__ == "__main__":
    main()

"""Bystanders under abuse: what well-behaved sessions see while abusive clients hit the same worker process.

    python -m benchmarks.abuse [--seconds 10]      # part of `make bench`

One `guess` server with one worker (its tools parse model text). A bystander process steps 32 sessions in
lock-step with valid tool calls and records each step's latency: first alone (the anchor), then while these
run against the same worker:
- a client stepping a 40,000-character action (text with no tool call) in a loop;
- a client stepping 10 MB of nested brackets in a loop (a 10 MB frame, refused by the action size limit);
- a client that sends steps and never reads its answers;
- 16 connections, each trickling a 1 MiB frame one byte every half second.
Reported: bystander step p50/p99 alone and under abuse, the worker's RSS before, under and 5 s after the
abusers leave, and whether the trickling connections were cut. The goals: p99 under abuse below 50 ms,
RSS back within 10% of its baseline.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import threading
import time

import numpy as np

from benchmarks.measures import rss_bytes, save_result

BYSTANDERS = 32
GUESS = {"name": "divisible_by", "arguments": {"divisor": 2}}  # never ends the episode


# -- the bystander (a process of its own, so that the abusers' client work does not slow it) --------------


async def _bystander(url: str, seconds: float) -> list[float]:
    import openenv_gym

    latencies = []
    async with openenv_gym.AsyncVectorClient(url, BYSTANDERS) as client:
        await client.reset(options={"max_steps": 10**9})
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            await client.step([GUESS] * BYSTANDERS)
            latencies.append(time.perf_counter() - started)
    return latencies


def measure_bystander(url: str, seconds: float) -> dict[str, float]:
    done = subprocess.run([sys.executable, "-m", "benchmarks.abuse", "--bystander", url, "--seconds", str(seconds)],
                          capture_output=True, text=True, check=True)
    ms = np.asarray(json.loads(done.stdout)) * 1000
    return {"steps": len(ms), "p50_ms": float(np.percentile(ms, 50)), "p99_ms": float(np.percentile(ms, 99)),
            "max_ms": float(ms.max())}


# -- the abusers ---------------------------------------------------------------------------------------------


async def _stepping(url: str, action: str, stop: asyncio.Event, counts: dict) -> None:
    import openenv_gym

    async with openenv_gym.connect(url) as conn:
        session = conn.session()
        await session.reset(options={"max_steps": 10**9})
        while not stop.is_set():
            await session.step(action)
            counts[len(action)] = counts.get(len(action), 0) + 1


def _never_reading(url: str, stop: threading.Event) -> int:
    from benchmarks.raw_websocket import frame, open_raw, read_frame

    sock = open_raw(url)
    sock.sendall(frame([{"id": 0, "op": "reset", "options": {"max_steps": 10**9}}]))
    session = read_frame(sock)[0]["session"]
    request = frame([{"id": i, "op": "step", "session": session, "action": GUESS} for i in range(200)])
    sock.setblocking(False)
    sent, pending = 0, memoryview(request)
    while not stop.is_set():
        try:
            written = sock.send(pending)
        except BlockingIOError:
            time.sleep(0.01)  # the server stopped reading us: TCP pushes back
            continue
        sent += written
        pending = pending[written:] or memoryview(request)
    sock.close()
    return sent


def _trickling(url: str, stop: threading.Event, cut: list) -> None:
    from benchmarks.raw_websocket import frame_header, open_raw

    sock = open_raw(url)
    sock.sendall(frame_header(2**20))
    try:
        while not stop.is_set():
            sock.sendall(b"[")
            time.sleep(0.5)
    except OSError:
        cut.append(True)  # the server cut it: the frame deadline
    finally:
        sock.close()


def run(seconds: float) -> dict:
    from openenv_gym.client.local import LocalServer

    server = LocalServer("guess", 1, 10_000, "--frame-timeout", str(max(2.0, seconds / 3)))
    pid = server.process.pid
    try:
        alone = measure_bystander(server.url, seconds)
        time.sleep(5.0)
        baseline_rss = rss_bytes(pid)  # warmed up by the bystanders' first run, as the 5 s after is
        stop_threads, stop_loop, cut = threading.Event(), None, []
        counts: dict[int, int] = {}
        sent: list[int] = []

        async def abuse() -> None:
            nonlocal stop_loop
            stop_loop = asyncio.Event()
            tasks = [asyncio.ensure_future(_stepping(server.url, "x" * 40_000, stop_loop, counts)),
                     asyncio.ensure_future(_stepping(server.url, "[" * 10_000_000, stop_loop, counts))]
            await asyncio.sleep(seconds + 2)
            stop_loop.set()
            await asyncio.gather(*tasks)

        threads = [threading.Thread(target=lambda: sent.append(_never_reading(server.url, stop_threads)))]
        threads += [threading.Thread(target=_trickling, args=(server.url, stop_threads, cut)) for _ in range(16)]
        for thread in threads:
            thread.start()
        abusing = threading.Thread(target=lambda: asyncio.run(abuse()))
        abusing.start()
        time.sleep(1.0)  # the abusers are at it
        under = measure_bystander(server.url, seconds)
        peak_rss = rss_bytes(pid)
        abusing.join()
        stop_threads.set()
        for thread in threads:
            thread.join()
        time.sleep(5.0)
        after_rss = rss_bytes(pid)
    finally:
        server.stop()
    return {"bystanders": BYSTANDERS, "alone": alone, "under_abuse": under,
            "abuser_steps": {"40k_chars": counts.get(40_000, 0), "10MB_brackets": counts.get(10_000_000, 0)},
            "never_reading_bytes_sent": sent[0] if sent else 0, "trickling_cut": len(cut),
            "rss_mib": {"baseline": baseline_rss / 2**20, "under_abuse": peak_rss / 2**20,
                        "5s_after": after_rss / 2**20},
            "rss_after_vs_baseline": after_rss / baseline_rss}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=10.0, help="bystander measurement per phase")
    parser.add_argument("--bystander", metavar="URL", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.bystander:
        import uvloop

        print(json.dumps(uvloop.run(_bystander(args.bystander, args.seconds))))
        return
    result = run(args.seconds)
    save_result("abuse", result)
    alone, under = result["alone"], result["under_abuse"]
    print(f"bystanders ({BYSTANDERS} sessions, lock-step) alone: p50 {alone['p50_ms']:.2f} ms, p99 "
          f"{alone['p99_ms']:.2f} ms; under abuse: p50 {under['p50_ms']:.2f} ms, p99 {under['p99_ms']:.2f} ms "
          f"(goal < 50 ms), max {under['max_ms']:.1f} ms")
    print(f"abusers: {result['abuser_steps']} steps answered, the non-reading client got "
          f"{result['never_reading_bytes_sent'] / 2**20:.1f} MiB in before TCP pushed back, "
          f"{result['trickling_cut']}/16 trickling connections cut")
    rss = result["rss_mib"]
    print(f"worker RSS: {rss['baseline']:.0f} MiB before, {rss['under_abuse']:.0f} MiB under abuse, "
          f"{rss['5s_after']:.0f} MiB 5 s after ({result['rss_after_vs_baseline']:.2f}x baseline, goal <= 1.10x)")


if __name__ == "__main__":
    main()

"""Harbor tasks served: many concurrent sandboxed trials, and what a trial costs part by part.

The tasks' images are emulated over this machine's root here (--engine none); in their own images, against
Harbor's own runner in the same engine, see benchmarks/harbor_images.py.

1. Crowd: `sessions` concurrent sessions, each playing `rounds` trials of a small task (tests/harbor_tasks/
   legacy_v10: its image a WORKDIR, its verifier a bash script) with the oracle (reset with oracle=True, then
   submit), on one server worker: trials/s, errors, and how many reached the top reward.
2. Parts: `parts` trials one after the other; the p50 of a reset without the oracle (the sandbox taken and
   renewed, Harbor's layout and the image's files staged), of the oracle (solve.sh run in the trial), of a bash
   step (`true`), and of a submit (tests staged, test.sh run, its reward read).

    python -m benchmarks.harbor [--sessions 256] [--rounds 2] [--parts 50]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.measures import save_result
from openenv_gym.client.local import LocalServer
from openenv_gym.importers import import_environment

TASKS = Path(__file__).resolve().parent.parent / "tests" / "harbor_tasks"
TASK = "legacy_v10"
SUBMIT = {"name": "submit", "arguments": {}}


async def crowd(url: str, sessions: int, rounds: int, options: dict | None = None) -> dict:
    """`sessions` at once, each playing `rounds` trials with the oracle (reset with `options`, then submit)."""
    import openenv_gym

    errors, top = 0, 0

    async def player(conn) -> None:
        nonlocal errors, top
        session = conn.session()
        for _ in range(rounds):
            try:
                await session.reset(options=options or {"task": TASK, "oracle": True})
                _, reward, *_ = await session.step(SUBMIT)
                top += reward == 1.0
            except Exception:
                errors += 1
        await session.close()

    async with openenv_gym.connect(url) as conn:
        began = time.perf_counter()
        await asyncio.gather(*(player(conn) for _ in range(sessions)))
        seconds = time.perf_counter() - began
    return {"trials": sessions * rounds, "seconds": seconds, "trials_per_s": sessions * rounds / seconds,
            "errors": errors, "top_reward": top}


async def parts(url: str, count: int, task: dict | None = None) -> dict:
    """The p50 (ms) of each part of a trial, `count` trials one after the other."""
    import openenv_gym

    timings: dict[str, list[float]] = {"reset": [], "reset_with_oracle": [], "bash_step": [], "submit": []}
    async with openenv_gym.connect(url) as conn:
        session = conn.session()
        for _ in range(count):
            for oracle in (False, True):
                began = time.perf_counter()
                await session.reset(options={**({"task": TASK} if task is None else task), "oracle": oracle})
                timings["reset_with_oracle" if oracle else "reset"].append(time.perf_counter() - began)
                began = time.perf_counter()
                await session.step({"name": "bash", "arguments": {"command": "true"}})
                timings["bash_step"].append(time.perf_counter() - began)
                began = time.perf_counter()
                await session.step(SUBMIT)
                timings["submit"].append(time.perf_counter() - began)
        await session.close()
    return {name: 1000 * statistics.median(values) for name, values in timings.items()}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--parts", type=int, default=50)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        [imported] = import_environment(TASKS, "bench", Path(scratch), engine="none")
        with LocalServer(str(imported.folder), 1, args.sessions + 10) as server:
            split = asyncio.run(parts(server.url, args.parts))
            many = asyncio.run(crowd(server.url, args.sessions, args.rounds))
    result = {"task": TASK, "crowd": many, "parts_p50_ms": split}
    print(f"Harbor trials of {TASK} with the oracle, {args.sessions} sessions at once x {args.rounds}, one worker:")
    print(f"  {many['trials_per_s']:.1f} trials/s, {many['errors']} errors, {many['top_reward']} of "
          f"{many['trials']} at the top reward")
    print("  a trial's parts, p50 (one after the other): " + ", ".join(f"{name} {ms:.1f} ms"
                                                                        for name, ms in split.items()))
    save_result("harbor", result)
    return result


if __name__ == "__main__":
    main()

"""Harbor tasks in their own images, against Harbor's own runner (harbor 0.25, `harbor run`) in the same engine on
the same machine, in one run.

The task is tests/harbor_image_tasks/figlet_user: its Dockerfile apt-installs figlet, runs Python, adds a user,
sets ENV, WORKDIR, USER and an ENTRYPOINT, over a stand-in base (Debian 12 made by mmdebstrap, tagged
openenv-gym-test/bookworm-sandbox:stand-in: no registry is reachable here). Its oracle reaches 1.0 on both sides.

1. Versus: `trials` oracle trials, `concurrency` at a time (8, then 32): trials/s of ours (the task imported with
   the engine and served, one worker per core; each trial a reset with the oracle, then a submit) and of Harbor's
   (`harbor run -a oracle -k trials -n concurrency`, timed whole, as its user waits for it), every reward read.
2. Parts: `parts` trials one after the other: the p50 of a reset (an image sandbox, its files exported before; the
   task's entrypoint started and its image's healthcheck passed), of a reset that plays the oracle, of a bash step
   and of a submit: where a trial's time goes. And the reset alone, of a bare task in the same base image (no
   entrypoint, no healthcheck): what a sandbox over an image costs.
3. Crowd: `crowd` trials at once on one server, then what is left once it has stopped: processes of the images'
   uids, the episodes' control groups, containers, mounts of the exported files.

    python -m benchmarks.harbor_images [--engine docker] [--trials 32] [--concurrency 8 32] [--parts 50]
                                       [--crowd 256]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import tempfile
import time
from pathlib import Path

from benchmarks.harbor import crowd, parts
from benchmarks.harbor_runner import HarborRunner
from benchmarks.measures import save_result
from openenv_gym.client.local import LocalServer
from openenv_gym.importers import import_environment
from openenv_gym.manifests.home import home
from openenv_gym.sandbox.sandbox import image_uids

ROOT = Path(__file__).resolve().parent.parent
TASK = ROOT / "tests" / "harbor_image_tasks" / "figlet_user"
ORACLE = {"oracle": True}


def ours(url: str, trials: int, concurrency: int) -> dict:
    many = asyncio.run(crowd(url, concurrency, trials // concurrency, ORACLE))
    return {"trials_per_s": many["trials_per_s"], "errors": many["errors"], "top": many["top_reward"],
            "trials": many["trials"]}


def harbors(runner: HarborRunner, engine: str, jobs: Path, trials: int, concurrency: int) -> dict:
    began = time.perf_counter()
    results = runner.run(TASK, "oracle", engine, jobs, attempts=trials, concurrent=concurrency)
    seconds = time.perf_counter() - began
    phases = {phase: sum(trial.phases.get(phase, 0.0) for trial in results) / max(len(results), 1)
              for phase in ("environment_setup", "agent_setup", "agent_execution", "verifier")}
    return {"trials_per_s": len(results) / seconds, "errors": sum(trial.error is not None for trial in results),
            "top": sum((trial.rewards or {}).get("reward") == 1.0 for trial in results), "trials": len(results),
            "trial_seconds_mean": sum(trial.seconds for trial in results) / max(len(results), 1),
            "phase_seconds_mean": phases}


def _bare_task(scratch: Path) -> Path:
    """A task of the same base, with nothing an image adds at its start: no entrypoint, no healthcheck."""
    task = scratch / "bare"
    for name, text in {"task.toml": '[task]\nname = "openenv-gym/bare"\n', "instruction.md": "Nothing.\n",
                       "environment/Dockerfile": "FROM openenv-gym-test/bookworm-sandbox:stand-in\nWORKDIR /app\n",
                       "solution/solve.sh": "#!/bin/sh\ntrue\n",
                       "tests/test.sh": "#!/bin/sh\necho 1 > /logs/verifier/reward.txt\n"}.items():
        (task / name).parent.mkdir(parents=True, exist_ok=True)
        (task / name).write_text(text)
    return task


def leftovers(engine: str, containers_before: int) -> dict:
    """What a stopped server left: processes of the images' uids, episode groups, containers, mounts of the
    exported files (in any process's mount table)."""
    base, count = image_uids()
    processes = 0
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            uid = int(next(line for line in status.read_text().splitlines() if line.startswith("Uid:")).split()[1])
        except (OSError, StopIteration):
            continue
        processes += base <= uid < base + count
    groups = sum(1 for _ in Path("/sys/fs/cgroup").glob("*/openenv-gym/*-*")) + \
        sum(1 for _ in Path("/sys/fs/cgroup").glob("openenv-gym/*-*"))
    exported = str(home() / "images" / "rootfs")
    mounts = 0
    for table in Path("/proc").glob("[0-9]*/mountinfo"):
        try:
            mounts += table.read_text().count(exported)
        except OSError:
            continue
    return {"processes": processes, "cgroups": groups, "containers": _containers(engine) - containers_before,
            "mounts": mounts}


def _containers(engine: str) -> int:
    listed = subprocess.run([engine, "ps", "-aq"], capture_output=True, text=True, check=True)
    return len(listed.stdout.split())


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--engine", choices=("docker", "podman"), default="docker")
    parser.add_argument("--trials", type=int, default=32)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[8, 32])
    parser.add_argument("--parts", type=int, default=50)
    parser.add_argument("--crowd", type=int, default=256)
    parser.add_argument("--harbor", type=Path, default=ROOT / ".venv-envs" / "harbor-runner",
                        help="where Harbor's runner is made (once)")
    args = parser.parse_args(argv)
    runner = HarborRunner.ready(args.harbor)
    workers = os.cpu_count() or 1
    result: dict = {"engine": args.engine, "task": TASK.name, "workers": workers, "versus": {}}
    with tempfile.TemporaryDirectory() as scratch:
        began = time.perf_counter()
        [imported] = import_environment(TASK, "bench-images", Path(scratch), engine=args.engine)
        result["import_seconds"] = time.perf_counter() - began  # (the image built, unless built before)
        containers = _containers(args.engine)
        with LocalServer(str(imported.folder), workers, max(args.crowd, max(args.concurrency)) + 10) as server:
            for concurrency in args.concurrency:
                mine = ours(server.url, args.trials, concurrency)
                theirs = harbors(runner, args.engine, Path(scratch) / "jobs", args.trials, concurrency)
                result["versus"][concurrency] = {"ours": mine, "harbor": theirs,
                                                 "ratio": mine["trials_per_s"] / theirs["trials_per_s"]}
                print(f"{args.trials} oracle trials, {concurrency} at a time: ours {mine['trials_per_s']:.2f} "
                      f"trials/s ({mine['top']} of {mine['trials']} at 1.0, {mine['errors']} errors), Harbor's "
                      f"{theirs['trials_per_s']:.2f} ({theirs['top']} at 1.0, {theirs['errors']} errors): "
                      f"{result['versus'][concurrency]['ratio']:.1f}x", flush=True)
            result["parts_p50_ms"] = asyncio.run(parts(server.url, args.parts, {}))
            print("a trial's parts, p50, one after the other: " + ", ".join(
                f"{name} {ms:.1f} ms" for name, ms in result["parts_p50_ms"].items()), flush=True)
            result["crowd"] = asyncio.run(crowd(server.url, args.crowd, 1, ORACLE))
        result["left"] = leftovers(args.engine, containers)
        [bare] = import_environment(_bare_task(Path(scratch)), "bench-bare", Path(scratch), engine=args.engine)
        with LocalServer(str(bare.folder), 1, 10) as server:
            result["bare_parts_p50_ms"] = asyncio.run(parts(server.url, args.parts, {}))
    print(f"a bare task's reset, p50: {result['bare_parts_p50_ms']['reset']:.1f} ms")
    crowded = result["crowd"]
    print(f"{args.crowd} trials at once: {crowded['trials_per_s']:.1f} trials/s, {crowded['errors']} errors, "
          f"{crowded['top_reward']} at 1.0; left after: {result['left']}")
    save_result(f"harbor_images_{args.engine}", result)
    return result


if __name__ == "__main__":
    main()

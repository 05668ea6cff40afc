"""Every Harbor task under the folders given (a checkout's examples/tasks, the cookbook's recipes, a dataset),
imported and validated one by one, as a new user would: how many import, how many reach the top reward with their
oracle and the floor with nothing, how many without an oracle play (reset, a step, the floor), and why each other one
does not.

    python -m benchmarks.harbor_examples FOLDER [FOLDER ...] [--out harbor_examples.json]
    python -m benchmarks.harbor_examples DATASET --read-only      # a large one: why each task would be refused
    python -m benchmarks.harbor_examples DATASET --sample 150     # and 150 of those it takes, at random, played

With --engine docker|podman, each task is built into its image at import and played in it, the image then removed
with its exported files (run it in a home of its own: every image that home built goes); the default, none,
emulates images over this machine's root; --refused then samples among the tasks the emulation refuses, and
--harbor plays each task taken with Harbor's own runner too (its oracle and nop agents, the same engine), and says
whether every reward equals ours.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import random
import re
import shutil
import tempfile
from pathlib import Path

import openenv_gym
from benchmarks.harbor_runner import HarborRunner
from openenv_gym.cli.validate import validate
from openenv_gym.client.local import LocalServer
from openenv_gym.errors import OpenEnvGymError
from openenv_gym.importers import ImportFailedError, import_environment
from openenv_gym.importers.harbor import task_folders
from openenv_gym.importers.harbor_task import read_task
from openenv_gym.manifests.harbor import TaskRefusedError
from openenv_gym.manifests.images import clean_images, exported_dir


def try_task(folder: Path, scratch: Path, engine: str = "none", harbor: HarborRunner | None = None) \
        -> tuple[str, str]:
    """(what happened: refused | no oracle | passed | failed | differs from harbor | harbor cannot run it, why)."""
    try:
        [result] = import_environment(folder, f"task{len(list(scratch.iterdir()))}", scratch, engine=engine)
    except ImportFailedError as exc:
        return "refused", str(exc).split(": ", 1)[-1]
    if harbor is not None:
        try:
            against = _against_harbor(folder, result.folder, engine, harbor, scratch)
        except (OpenEnvGymError, RuntimeError) as exc:  # (our server did not start, or Harbor wrote no result)
            return "failed", f"{type(exc).__name__}: {str(exc)[:300]}"
        if against is not None:
            return against
    report = validate(str(result.folder), 0.5, 1)
    checks = {check["check_id"]: check for check in report["results"]}
    oracle = checks.get("semantic.oracle_max", {})
    played = all(check["status"] not in ("fail", "error") for check in report["results"])
    if oracle.get("status") == "skip" and played:  # (imported and played, with nothing to reach the top with)
        return "no oracle", "; ".join(oracle.get("evidence", []))
    if report["verdict"] == "pass":
        return "passed", "; ".join(check["evidence"][0] for check in report["results"]
                                   if check["check_id"].startswith("semantic") and check["evidence"])
    failed = [f"{check['check_id']}: {'; '.join(check['evidence'][:2])}" for check in report["results"]
              if check["status"] in ("fail", "error")]
    return "failed", " | ".join(failed) or report.get("error", "")


def _against_harbor(folder: Path, imported: Path, engine: str, harbor: HarborRunner, scratch: Path) \
        -> tuple[str, str] | None:
    """("differs from harbor" or "harbor cannot run it", why) where our rewards are not Harbor's own runner's on
    the task (its oracle and nop agents); None where they are (an oracle that errors on both sides, a task without
    a solution, is the same outcome)."""
    ours = {}
    with LocalServer(str(imported), 1, 10) as server:
        for agent, options in (("oracle", {"oracle": True}), ("nop", {})):
            ours[agent] = asyncio.run(_submitted(server.url, options))
    differs, unrun = [], []
    for agent in ("oracle", "nop"):
        trials = harbor.run(folder, agent, engine, scratch / "harbor-jobs")
        if len(trials) != 1:  # (a trial that failed before it began writes no result of its own: a no-network
            unrun.append(f"{agent}: harbor ran {len(trials)} trials, ours {ours[agent]}")  # task under docker)
            continue
        [trial] = trials
        theirs = trial.rewards if trial.error is None else f"error {trial.error[:200]}"
        if theirs != ours[agent] and not (isinstance(ours[agent], str) and trial.error is not None):
            differs.append(f"{agent}: harbor {theirs}, ours {ours[agent]}")
    if differs:
        return "differs from harbor", "; ".join(differs + unrun)
    return ("harbor cannot run it", "; ".join(unrun)) if unrun else None


async def _submitted(url: str, options: dict) -> dict | str:
    """The metrics of a trial submitted at once after its reset (with the oracle played first, or not), or the
    error that ended it."""
    async with openenv_gym.connect(url) as conn:
        session = conn.session()
        try:
            await session.reset(options=options)
            *_, info = await session.step({"name": "submit", "arguments": {}})
            return info["metrics"]
        except OpenEnvGymError as exc:
            return f"error {str(exc)[:200]}"
        finally:
            await session.close()


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folders", type=Path, nargs="+")
    parser.add_argument("--out", type=Path, default=Path("harbor_examples.json"))
    parser.add_argument("--read-only", action="store_true", help="only read each task: taken or refused, and why")
    parser.add_argument("--sample", type=int, default=0, help="play only this many of the tasks taken, at random")
    parser.add_argument("--engine", choices=("docker", "podman", "none"), default="none",
                        help="build each task's image with this engine and play it there (default none: emulated)")
    parser.add_argument("--refused", action="store_true", help="with --sample: sample among the tasks the "
                                                               "emulation refuses")
    parser.add_argument("--seed", type=int, default=0, help="with --sample: the seed of the random choice (another "
                                                            "seed, another sample)")
    parser.add_argument("--harbor", type=Path, default=None, metavar="CACHE",
                        help="play each task with Harbor's own runner too (made in CACHE), same engine, and compare")
    args = parser.parse_args(argv)
    folders = {f"{root.name}/{folder.relative_to(root).as_posix()}": folder
               for root in args.folders for folder in task_folders(root)}
    outcomes: dict[str, tuple[str, str]] = {}
    if args.read_only or args.sample:
        for name, folder in folders.items():
            try:
                read_task(folder)
            except TaskRefusedError as exc:
                outcomes[name] = ("refused", str(exc))
        reasons = collections.Counter(_reason(why) for _, why in outcomes.values())
        print(f"{len(folders) - len(outcomes)} of {len(folders)} tasks taken; refused:")
        for reason, count in reasons.most_common(25):
            print(f"  {count:5}  {reason}")
        taken = sorted(outcomes if args.refused else set(folders) - set(outcomes))
        folders = {name: folders[name] for name in random.Random(args.seed).sample(taken, min(args.sample, len(taken)))}
        if args.refused:  # (those sampled are tried again, with the engine; the others stay as the emulation said)
            outcomes = {name: outcome for name, outcome in outcomes.items() if name not in folders}
    harbor = HarborRunner.ready(args.harbor) if args.harbor else None
    with tempfile.TemporaryDirectory() as scratch:
        for name, folder in folders.items():
            outcomes[name] = try_task(folder, Path(scratch), args.engine, harbor)
            print(f"{outcomes[name][0]:10} {name}: {outcomes[name][1][:200]}", flush=True)
            if args.engine != "none":  # (a task's image and its exported files, about a GB: gone once it played)
                clean_images([], everything=True)
                # and whatever was unpacked of an image the engine no longer holds (a task that failed half-way
                # left 13 GB over 40 tasks): this home is the benchmark's own
                shutil.rmtree(exported_dir(), ignore_errors=True)
    counts = collections.Counter(kind for kind, _ in outcomes.values())
    print(", ".join(f"{count} {kind}" for kind, count in counts.most_common()), f"of {len(outcomes)} tasks")
    args.out.write_text(json.dumps({"counts": counts, "tasks": outcomes}, indent=1))
    return {"counts": dict(counts), "tasks": outcomes}


def _reason(why: str) -> str:
    """A refusal's kind, its particulars left out (which packages, which line)."""
    why = re.sub(r"^environment/Dockerfile line \d+: ", "", why)
    if "apt-get install of" in why:
        return "apt-get install of packages this machine has not"
    if "cannot be emulated" in why:
        return "RUN " + why.split("RUN ", 1)[-1].split()[0].strip("'") + " ...: not emulated"
    return re.sub(r"[^ :,]*/[^ :,]*", "PATH", why)[:120]


if __name__ == "__main__":
    main()

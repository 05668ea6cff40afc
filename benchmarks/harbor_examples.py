"""Every Harbor task under the folders given (a checkout's examples/tasks, the cookbook's recipes, a dataset),
imported and validated one by one, as a new user would: how many import, how many reach the top reward with their
oracle and the floor with nothing, and why each other one does not.

    python -m benchmarks.harbor_examples FOLDER [FOLDER ...] [--out harbor_examples.json]
"""

from __future__ import annotations

import argparse
import collections
import json
import tempfile
from pathlib import Path

from openenv_gym.cli.validate import validate
from openenv_gym.importers import ImportFailedError, import_environment
from openenv_gym.importers.harbor import task_folders


def try_task(folder: Path, scratch: Path) -> tuple[str, str]:
    """(what happened: refused | no oracle | passed | failed, why)."""
    try:
        [result] = import_environment(folder, f"task{len(list(scratch.iterdir()))}", scratch)
    except ImportFailedError as exc:
        return "refused", str(exc).split(": ", 1)[-1]
    report = validate(str(result.folder), 0.5, 1)
    checks = {check["check_id"]: check for check in report["results"]}
    oracle = checks.get("semantic.oracle_max", {})
    if oracle.get("status") == "skip":
        return "no oracle", "; ".join(oracle.get("evidence", []))
    if report["verdict"] == "pass":
        return "passed", "; ".join(check["evidence"][0] for check in report["results"]
                                   if check["check_id"].startswith("semantic") and check["evidence"])
    failed = [f"{check['check_id']}: {'; '.join(check['evidence'][:2])}" for check in report["results"]
              if check["status"] in ("fail", "error")]
    return "failed", " | ".join(failed) or report.get("error", "")


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folders", type=Path, nargs="+")
    parser.add_argument("--out", type=Path, default=Path("harbor_examples.json"))
    args = parser.parse_args(argv)
    outcomes: dict[str, tuple[str, str]] = {}
    with tempfile.TemporaryDirectory() as scratch:
        for root in args.folders:
            for folder in task_folders(root):
                name = f"{root.name}/{folder.relative_to(root).as_posix()}"
                outcomes[name] = try_task(folder, Path(scratch))
                print(f"{outcomes[name][0]:10} {name}: {outcomes[name][1][:200]}", flush=True)
    counts = collections.Counter(kind for kind, _ in outcomes.values())
    print(", ".join(f"{count} {kind}" for kind, count in counts.most_common()), f"of {len(outcomes)} tasks")
    args.out.write_text(json.dumps({"counts": counts, "tasks": outcomes}, indent=1))
    return {"counts": dict(counts), "tasks": outcomes}


if __name__ == "__main__":
    main()

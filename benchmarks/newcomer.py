"""How long a newcomer takes from a fresh clone to a played episode of an imported public environment, following the
README alone: its shell blocks run in order, as written, in one shell (the install, then the import of marble-v1
from PyPI and its played episode), with empty caches (pip's off, a new uv cache, a new OPENENV_GYM_HOME). Blocks a
reader would not run to get there (a server that runs until stopped, one on another machine) are left out: those
whose `not run` reason names a server.

    python -m benchmarks.newcomer [--out benchmarks/results/newcomer.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.doc_blocks import ROOT, blocks_of

SERVERS = ("server", "cluster")  # what the skipped blocks need


def steps_of(readme: Path) -> list[str]:
    """The README's shell blocks a newcomer runs to reach an episode, in order."""
    return [block.code for block in blocks_of(readme) if block.language == "sh"
            and not (block.not_run and any(word in block.not_run for word in SERVERS))]


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "newcomer.json")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="newcomer-") as scratch:
        home = Path(scratch)
        started = time.perf_counter()
        subprocess.run(["git", "clone", "--quiet", str(ROOT), str(home / "openenv_gym")], check=True)
        cloned = time.perf_counter() - started
        steps = steps_of(home / "openenv_gym" / "README.md")
        environment = {key: value for key, value in os.environ.items()
                       if not key.startswith(("OPENENV_GYM_", "VIRTUAL_ENV", "PYTHONPATH", "UV_"))}
        environment |= {"PIP_NO_CACHE_DIR": "1", "UV_CACHE_DIR": str(home / "uv-cache"),
                        "OPENENV_GYM_HOME": str(home / "openenv-gym-home"),
                        "PATH": os.pathsep.join(p for p in environment.get("PATH", "").split(os.pathsep)
                                                if not p.startswith(str(Path(sys.executable).parent)))}
        script = "\n".join(["set -e", *(f"echo '== step {n}' >&2\n{step}" for n, step in enumerate(steps, 1))])
        timings, log = [], home / "stdout.log"
        with log.open("w") as stdout:
            done = subprocess.Popen(["bash", "-c", script], cwd=home, env=environment, text=True, stdout=stdout,
                                    stderr=subprocess.PIPE)
            for line in done.stderr:  # each step's start, as it comes
                if line.startswith("== step "):
                    timings.append(time.perf_counter() - started)
            done.wait()
        output = log.read_text()
        total = time.perf_counter() - started
    result = {"clone_s": round(cloned, 1), "steps": steps, "step_starts_s": [round(t, 1) for t in timings],
              "played_episode_s": round(total, 1), "exit_code": done.returncode, "last_output": output[-500:]}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(f"README's {len(steps)} shell blocks from a fresh clone, empty caches: exit {done.returncode}, "
          f"a played episode after {total:.0f} s (clone {cloned:.1f} s; blocks started at {result['step_starts_s']})")
    print(output[-300:].strip())
    return result


if __name__ == "__main__":
    main()

"""A Harbor task played with bash: each step a command run in the task's environment, then `submit`, which runs the
task's verifier (tests/test.sh) and gives its reward.

The task is written here (a folder in Harbor's layout: instruction.md, task.toml, environment/Dockerfile, tests/);
point --task at any Harbor task folder instead. By default the image is emulated over this machine's root
(--engine none); with --engine docker or podman it is built, and each episode runs in the image's files.

    python examples/harbor_bash.py [--task FOLDER] [--engine none|docker|podman]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import gymnasium as gym

TASK = {
    "instruction.md": "Write the sum of the numbers in numbers.txt to answer.txt, in the working directory.\n",
    "task.toml": 'schema_version = "1.4"\n\n[task]\nname = "example/sum"\n\n[agent]\ntimeout_sec = 60.0\n\n'
                 '[verifier]\ntimeout_sec = 60.0\n',
    "environment/Dockerfile": "FROM ubuntu:24.04\nWORKDIR /app\nCOPY numbers.txt /app/numbers.txt\n",
    "environment/numbers.txt": "12\n30\n",
    "tests/test.sh": '#!/bin/bash\nif [ "$(cat /app/answer.txt)" = "42" ]; then echo 1 > /logs/verifier/reward.txt; '
                     "else echo 0 > /logs/verifier/reward.txt; fi\n",
}


def bash(command: str) -> dict:
    return {"name": "bash", "arguments": {"command": command}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", type=Path, help="a Harbor task folder (default: the one written here)")
    parser.add_argument("--engine", default="none", choices=("none", "docker", "podman"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        task = args.task
        if task is None:
            task = Path(scratch) / "sum"
            for name, text in TASK.items():
                (task / name).parent.mkdir(parents=True, exist_ok=True)
                (task / name).write_text(text)
        subprocess.run([sys.executable, "-m", "openenv_gym", "import", str(task), "--name", "example-sum",
                        "--output-dir", str(Path(scratch) / "servers"), "--engine", args.engine], check=True)

        import openenv_gym

        openenv_gym.register_all()  # (imported after `import openenv_gym` would have registered it)
        env = gym.make("openenv/harbor-example-sum")
        for attempt in ("the sum", "a wrong answer"):
            instruction, info = env.reset()
            print(f"task: {instruction.strip()}  tools: {[tool['name'] for tool in info['tools']]}")
            listing, *_ = env.step(bash("cat numbers.txt"))
            numbers = [int(n) for n in re.findall(r"^-?\d+$", listing, re.MULTILINE)]
            answer = sum(numbers) if attempt == "the sum" else sum(numbers) + 1
            env.step(bash(f"echo {answer} > answer.txt"))
            _, reward, terminated, _, info = env.step({"name": "submit", "arguments": {}})
            print(f"{attempt} ({answer}): reward {reward}, terminated {terminated}")
        env.close()


if __name__ == "__main__":
    main()

"""Import an environment people publish, and play it.

marble-v1 is a Verifiers v1 taskset on PyPI (place pieces so a falling marble lands in a ring; a physics
integrator scores the layout). `openenv-gym import` downloads it, builds its venv and loads it once; then it is
a gym id like any other. Its episodes run their programs in a sandbox each (bubblewrap: `openenv-gym doctor`).

    python examples/import_and_play.py [--episodes 3] [--output-dir servers]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import gymnasium as gym

PACKAGE = "marble-v1==0.1.0"


def layout_reply(placements: list[dict]) -> str:
    """A reply as the task asks for one: the layout as a fenced JSON array. (A model writes this.)"""
    return "My layout:\n```json\n" + json.dumps(placements) + "\n```"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=3)
    parser.add_argument("--output-dir", type=Path, default=Path("servers"))
    args = parser.parse_args()
    subprocess.run([sys.executable, "-m", "openenv_gym", "import", PACKAGE, "--name", "marble", "--output-dir",
                    str(args.output_dir), "--force"], check=True)

    import openenv_gym

    openenv_gym.register_all()  # (imported after `import openenv_gym` would have registered it)
    env = gym.make("openenv/verifiers-marble")
    for seed in range(args.episodes):
        # expose_answer: the task's hidden parts in info (a level is built along a working layout: its solution)
        _, info = env.reset(seed=seed, options={"expose_answer": True})
        solution = info["task_data"]["solution"]
        _, reward, _, _, info = env.step(layout_reply(solution))
        print(f"episode {seed}, the level's own layout: reward {reward} {info['rewards']}")
        env.reset(seed=seed)
        _, reward, _, _, info = env.step(layout_reply([]))
        print(f"episode {seed}, no pieces at all: reward {reward} {info['rewards']}")
    env.close()

if __name__ == "__main__":
    main()

"""make demo: about 2,000 episodes of the shipped `guess` game through gym.make, scripted policy.

The policy bisects the range it learns from the reset info and the "higher"/"lower" answers.
gym.make with no base_url starts a local server (the embedded default) and stops it at exit.
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym
from tqdm import tqdm

import openenv_gym  # noqa: F401  (registers openenv/guess)


def bisect_policy(low: int, high: int, obs: str) -> tuple[dict, int, int]:
    """Next guess, and the range still possible after the last answer `obs`."""
    if "higher than" in obs:
        low = int(obs.rstrip(".").split()[-1]) + 1
    elif "lower than" in obs:
        high = int(obs.rstrip(".").split()[-1]) - 1
    return {"name": "guess", "arguments": {"number": (low + high) // 2}}, low, high


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--episodes", type=int, default=2000)
    args = parser.parse_args()

    started = time.perf_counter()
    env = gym.make("openenv/guess")
    obs, info = env.reset(seed=0)
    print(f"gym.make + first reset: {time.perf_counter() - started:.2f} s (local server started)")
    print(f"first observation: {obs}")

    steps, total_reward = 0, 0.0
    started = time.perf_counter()
    for episode in tqdm(range(args.episodes), unit="ep", desc="guess"):
        if episode:
            obs, info = env.reset()
        low, high = info["low"], info["high"]
        done = False
        while not done:
            action, low, high = bisect_policy(low, high, obs)
            obs, reward, terminated, truncated, info = env.step(action)
            total_reward += reward
            steps += 1
            done = terminated or truncated
    elapsed = time.perf_counter() - started
    env.close()
    print(f"{args.episodes} episodes, {steps} steps in {elapsed:.2f} s: "
          f"{args.episodes / elapsed:,.0f} episodes/s, {steps / elapsed:,.0f} steps/s, "
          f"mean reward {total_reward / args.episodes:.3f}")


if __name__ == "__main__":
    main()

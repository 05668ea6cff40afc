"""The one-env-at-a-time path against lock-step: the shipped `guess` env played by an instant scripted policy
(bisection over the hints so far) through `openenv_gym.rollouts` (each env's action sent as its policy call
returns, episodes streamed as they end) and through a lock-step `gym.make_vec` loop (every env stepped at once,
autoreset in the same step), the same sessions on one local server worker, alternating rounds in one run.
Env steps/s of each and their ratio (goal: the stream at least 0.5x lock-step).

    python -m benchmarks.stream [--sessions 1024] [--steps 60000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import time

import gymnasium as gym

import openenv_gym
from benchmarks.guessing_policy import bisect_policy, guess_call
from benchmarks.measures import alternating, save_result
from openenv_gym.client.local import LocalServer


async def stream(url: str, sessions: int, steps: int) -> dict:
    """Episodes from rollouts() until `steps` env steps were played."""
    played = episodes = 0
    started = time.perf_counter()
    finished = openenv_gym.rollouts("openenv/guess", bisect_policy, base_url=url, num_envs=sessions, seed=0)
    async with contextlib.aclosing(finished):
        async for episode in finished:
            played += episode.steps
            episodes += 1
            if played >= steps:
                break
    seconds = time.perf_counter() - started
    return {"steps": played, "episodes": episodes, "seconds": seconds, "steps_per_s": played / seconds}


def lock_step(url: str, sessions: int, steps: int) -> dict:
    """A make_vec loop: every env stepped at once, a finished env reset in the same step."""
    started = time.perf_counter()
    envs = gym.make_vec("openenv/guess", num_envs=sessions, base_url=url, autoreset_mode="SameStep")
    try:
        obs, _ = envs.reset(seed=0)
        texts = [[text] for text in obs]
        played = episodes = 0
        while played < steps:
            obs, _, terminated, truncated, _ = envs.step([guess_call(seen) for seen in texts])
            played += sessions
            for env, (text, ended) in enumerate(zip(obs, terminated | truncated, strict=True)):
                if ended:
                    texts[env] = [text]  # the next episode's first observation
                    episodes += 1
                else:
                    texts[env].append(text)
    finally:
        envs.close()
    seconds = time.perf_counter() - started
    return {"steps": played, "episodes": episodes, "seconds": seconds, "steps_per_s": played / seconds}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=60_000, help="env steps per run")
    parser.add_argument("--rounds", type=int, default=3, help="alternating runs of each, the median reported")
    args = parser.parse_args(argv)
    with LocalServer("guess", 1, 2 * args.sessions + 100) as server:
        runs, median = alternating(args.rounds, lock_step=lambda: lock_step(server.url, args.sessions, args.steps),
                                   stream=lambda: asyncio.run(stream(server.url, args.sessions, args.steps)))
    result = {"sessions": args.sessions, "steps": args.steps, "runs": runs, "steps_per_s": median,
              "ratio": median["stream"] / median["lock_step"]}
    print(f"guess, {args.sessions:,} sessions, scripted instant policy, one server worker (median of {args.rounds}):")
    print(f"  lock-step make_vec:  {median['lock_step']:>10,.0f} steps/s")
    print(f"  rollouts() stream:   {median['stream']:>10,.0f} steps/s")
    print(f"  stream / lock-step: {result['ratio']:.2f}x (goal >= 0.5x)")
    save_result("stream", result)
    return result


if __name__ == "__main__":
    main()

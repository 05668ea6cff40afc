"""Play an environment with a model behind any OpenAI-compatible server (vLLM, SGLang, a hosted API), as a stream of
finished episodes, GRPO groups with their advantages: what an async trainer consumes.

    vllm serve Qwen/Qwen3-0.6B --port 8001 --enable-auto-tool-choice --tool-call-parser hermes
    python examples/rollouts_openai.py --model-url http://127.0.0.1:8001/v1 --model Qwen/Qwen3-0.6B
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics

import openenv_gym
from openenv_gym.rollout import OpenAIPolicy


async def play(env_id: str, model_url: str, model: str, groups: int, group_size: int, num_envs: int) -> None:
    policy = OpenAIPolicy(model_url, model, temperature=1.0, max_tokens=256)
    stream = openenv_gym.rollouts(env_id, policy, num_envs=num_envs, episodes=groups, group_size=group_size,
                                  max_turns=10, seed=0)
    async with contextlib.aclosing(stream) as groups_played:
        async for group in groups_played:
            returns = group.rewards
            advantages = [None if e.advantage is None else round(e.advantage, 3) for e in group.episodes]
            tokens = sum(len(turn.completion_ids or ()) for episode in group.episodes for turn in episode.tokens)
            print(f"group {group.id}: returns {returns}, mean {statistics.mean(returns):.3f}, "
                  f"advantages {advantages}, {tokens} sampled tokens")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-url", required=True, help="the model server's OpenAI API root, http://HOST/v1")
    parser.add_argument("--model", required=True)
    parser.add_argument("--env", default="openenv/guess", help="a gym id (default openenv/guess)")
    parser.add_argument("--groups", type=int, default=4)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--num-envs", type=int, default=16, help="sessions playing at once")
    args = parser.parse_args()
    asyncio.run(play(args.env, args.model_url, args.model, args.groups, args.group_size, args.num_envs))


if __name__ == "__main__":
    main()

"""Train on any environment we serve with prime-rl: what its orchestrator does against our server, step by step.

prime-rl's orchestrator never runs an environment itself: it loads the taskset on its side, and for each episode of
a group sends one `run` (the task's data) to a Verifiers env server, which plays the rollout against the inference
server. `openenv-gym serve ENV --verifiers-port P` is such a server, for every kind of ENV, and the taskset
`openenv_gym_verifiers` is its catalog. In prime-rl's config (rl.toml):

    [[orchestrator.train.source]]
    name = "guess"
    [orchestrator.train.source.env.taskset]
    id = "openenv_gym_verifiers"
    url = "ws://127.0.0.1:8000"          # the server's own port (the taskset reads its catalog there)
    [orchestrator.train.source.serve]
    address = "tcp://127.0.0.1:5000"     # its --verifiers-port: prime-rl connects, it spawns no env server

This script starts such a server (`openenv-gym serve guess --verifiers-port 0`), prints those lines for it, and
makes the orchestrator's calls with Verifiers' own client: the taskset loaded as prime-rl loads it, one
`EnvClient.run` per episode of each group, the episodes' rewards. It needs verifiers 0.4 (`pip install
"verifiers>=0.4,<0.5"`) and a model behind an OpenAI-compatible server:

    vllm serve Qwen/Qwen3-0.6B --port 8001 --enable-auto-tool-choice --tool-call-parser hermes
    python examples/prime_rl_orchestrator.py --model-url http://127.0.0.1:8001/v1 --model Qwen/Qwen3-0.6B
"""

from __future__ import annotations

import argparse
import asyncio
import statistics

import verifiers.v1 as vf
from verifiers.v1.serve.client import EnvClient

from openenv_gym.client.local import LocalServer

TASKSET = "openenv_gym_verifiers"


def config_lines(url: str, address: str, env: str, seeds: list[int]) -> str:
    tasks = ", ".join(f"{{seed = {seed}}}" for seed in seeds)  # (guess has no catalog: its tasks are seeds)
    return (f'[[orchestrator.train.source]]\nname = "{env}"\n[orchestrator.train.source.env.taskset]\n'
            f'id = "{TASKSET}"\nurl = "{url}"\ntasks = [{tasks}]\n[orchestrator.train.source.serve]\n'
            f'address = "{address}"')


async def orchestrate(url: str, address: str, model_url: str, model: str, seeds: list[int], group_size: int) -> None:
    # the taskset, loaded on the orchestrator's side (prime_rl/orchestrator/envs.py: vf.load_taskset)
    taskset = vf.load_taskset(vf.resolve_env_config({"taskset": {"id": TASKSET, "url": url, "tasks": [
        {"seed": seed} for seed in seeds]}}).taskset)
    client = EnvClient(address)
    await client.wait_for_server_startup(timeout=60)
    inference = vf.EvalClientConfig(base_url=model_url)  # (training sends a TrainClientConfig with its renderer)
    sampling = vf.SamplingConfig(temperature=1.0, max_tokens=256)
    try:
        for task in taskset:  # one group per task: G runs of its data (prime_rl/orchestrator/dispatcher.py)
            data = task.data.model_dump(mode="json")
            episodes = await asyncio.gather(*(client.run(inference, model, sampling, data) for _ in range(group_size)))
            rewards = [episode.traces[0].reward if episode.traces else 0.0 for episode in episodes]
            turns = [len(episode.traces[0].calls) if episode.traces else 0 for episode in episodes]
            print(f"task {task.data.name}: rewards {[round(r, 3) for r in rewards]}, mean "
                  f"{statistics.mean(rewards):.3f}, model calls {turns}, ok {all(e.ok for e in episodes)}")
    finally:
        await client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-url", required=True, help="the model server's OpenAI API root, http://HOST/v1")
    parser.add_argument("--model", required=True)
    parser.add_argument("--env", default="guess", help="the environment to serve (default guess)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--group-size", type=int, default=4)
    args = parser.parse_args()
    with LocalServer(args.env, 1, 1000, "--verifiers-port", "0") as server:
        address = server.status["verifiers"]
        print(f"serving {args.env}: {server.url}, Verifiers' env server protocol on {address}; in rl.toml:\n")
        print(config_lines(server.url, address, args.env, args.seeds) + "\n")
        asyncio.run(orchestrate(server.url, address, args.model_url, args.model, args.seeds, args.group_size))


if __name__ == "__main__":
    main()

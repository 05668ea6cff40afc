"""Verifiers' own way of running a v1 episode, for tests to compare against: run by the environment's venv python.

    python verifiers_v1_oracle.py PROJECT TASKSET_ID TASK_INDEX REPLY...

loads the project's package as Verifiers' loader does (its folder on sys.path), runs one episode of the task with
`env.run_episode` inside `env.serving()` as Verifiers' eval runner does, with the null harness in Verifiers' own
subprocess runtime (each program started through uv), the model being a scripted OpenAI-compatible endpoint that
answers with the REPLYs in turn; prints what the episode scored and what the model was asked, as JSON.
"""

import asyncio
import json
import os
import sys

import verifiers.v1 as vf
from verifiers.v1.utils.loaders import load_environment, resolve_env_config

from openenv_gym.server.model_endpoint import ModelEndpointServer


async def main(project: str, taskset_id: str, index: int, replies: list[str]) -> dict:
    sys.path.insert(0, project)
    config = resolve_env_config({"taskset": {"id": taskset_id}})
    agents = {name: agent.model_copy(update={"runtime": vf.SubprocessConfig(),
                                             "harness": agent.harness or {"id": "null"}})
              for name, agent in config if isinstance(agent, vf.AgentConfig)}
    pinned = {name: agent.model_dump() for name, agent in agents.items()}
    env = load_environment(resolve_env_config({**config.model_dump(), **pinned}))
    task = list(env.taskset)[index]
    asked, answers = [], iter(replies)

    async def model(request):
        asked.append(request.messages)
        return {"content": next(answers), "tool_calls": []}

    endpoint = ModelEndpointServer()
    lease = await endpoint.open(model, "policy")
    os.environ["ORACLE_KEY"] = "unused"
    context = vf.ModelContext(model="policy", client=vf.EvalClientConfig(base_url=lease.base_url,
                                                                        api_key_var="ORACLE_KEY"))
    async with env.serving():
        episode = await env.run_episode(task, context)
    trace = episode.traces[0]
    return {"reward": trace.reward, "rewards": {k: r.score for k, r in trace.rewards.items()},
            "metrics": dict(trace.metrics), "stop_condition": trace.stop_condition, "ok": episode.ok,
            "asked": asked}


if __name__ == "__main__":
    os.environ["PATH"] = f"{os.path.dirname(sys.executable)}{os.pathsep}{os.environ['PATH']}"  # its uv
    print(json.dumps(asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]))))

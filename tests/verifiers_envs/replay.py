"""Test oracle: run episodes in process with verifiers alone (no openenv_gym), replaying assistant messages.

Run with the environment venv's python:
    python replay.py < {"source": ".../guessing.py", "env_args": {}, "episodes": [
                          {"split": "train", "index": 3, "replies": [{"content": "...", "tool_calls": [...]}]}]}
Prints a JSON list with each episode's reward, metrics and stop condition, as verifiers computed them.
An episode with "model": {"base_url", "name"} instead of replies asks that OpenAI-compatible server, through
verifiers' own client.
A job with "groups" instead (lists of such episodes) runs each group as `run_group` does: every rollout
unscored, then the rubric's `score_group` over their states; it prints one list per group.
"""

import asyncio
import importlib.util
import json
import sys
import time
from pathlib import Path

import verifiers as vf


class ReplayClient(vf.Client):
    """Answers the environment's model requests with the given replies, in order."""

    def __init__(self, replies):
        super().__init__(None)
        self.replies = list(replies)

    def setup_client(self, config):
        return None

    async def to_native_tool(self, tool):
        return tool

    async def to_native_prompt(self, messages):
        return messages, {}

    async def get_native_response(self, prompt, model, sampling_args, tools=None, **kwargs):
        return self.replies.pop(0)

    async def raise_from_native_response(self, response):
        return None

    async def from_native_response(self, reply):
        calls = [vf.ToolCall(**call) for call in reply.get("tool_calls") or []] or None
        message = vf.ResponseMessage(content=reply.get("content"), tool_calls=calls, is_truncated=False,
                                     finish_reason="tool_calls" if calls else "stop")
        return vf.Response(id="replay", created=int(time.time()), model="replay", message=message)

    async def close(self):
        return None


def load(source: str, env_args: dict):
    path = Path(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.load_environment(**env_args)


async def replay(env, episode: dict) -> dict:
    data = env.get_eval_dataset() if episode["split"] == "eval" else env.get_dataset()
    row = dict(data[episode["index"]])
    if "model" in episode:  # verifiers' own client, as its eval runs make it
        import os

        os.environ["REPLAY_MODEL_KEY"] = "unused"
        client = vf.ClientConfig(api_base_url=episode["model"]["base_url"], api_key_var="REPLAY_MODEL_KEY")
        output = await env.run_rollout(row, client, episode["model"]["name"], {})
    else:
        output = await env.run_rollout(row, ReplayClient(episode["replies"]), "replay", {})
    return {"reward": output["reward"], "metrics": output["metrics"], "stop_condition": output["stop_condition"]}


async def replay_group(env, episodes: list[dict]) -> list[dict]:
    states = []
    for episode in episodes:
        data = env.get_eval_dataset() if episode["split"] == "eval" else env.get_dataset()
        states.append(await env.rollout(dict(data[episode["index"]]), ReplayClient(episode["replies"]), "replay", {}))
    await env.rubric.score_group(states)
    return [{"reward": s["reward"], "metrics": s["metrics"], "stop_condition": s.get("stop_condition")}
            for s in states]


def main() -> None:
    job = json.load(sys.stdin)
    env = load(job["source"], job.get("env_args", {}))
    if "groups" in job:
        results = [asyncio.run(replay_group(env, group)) for group in job["groups"]]
    else:
        results = [asyncio.run(replay(env, episode)) for episode in job["episodes"]]
    print(json.dumps(results))


if __name__ == "__main__":
    main()

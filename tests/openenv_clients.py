"""Runs in an OpenEnv venv: OpenEnv's own clients play `guess` against a server; prints one JSON line.

    python openenv_clients.py http://127.0.0.1:PORT

GenericEnvClient plays a game by bisection with call_tool actions, reads the state, and sends a bad action
(OpenEnv's client raises on the error frame; the socket goes on). MCPToolClient (production mode: POST /mcp
plus /ws?session_id=) lists the tools and plays a game with call_tool. The server's texts say "higher",
"lower" or "correct".
"""

import asyncio
import json
import sys

from openenv.core.generic_client import GenericEnvClient
from openenv.core.mcp_client import MCPToolClient


def _text(observation) -> str:
    """What an observation says: its text field (an environment of openenv_gym's own), or the text of an MCP tool
    call's result (an OpenEnv MCP environment's CallToolObservation)."""
    if not isinstance(observation, dict):
        return str(observation)
    if "text" in observation:
        return observation["text"]
    result = observation.get("result") or {}
    texts = [item.get("text", "") for item in result.get("content") or ()] if isinstance(result, dict) else []
    return "\n".join(texts) or json.dumps(observation, sort_keys=True)


async def generic(url: str) -> dict:
    out: dict = {}
    async with GenericEnvClient(base_url=url) as env:
        first = await env.reset(seed=3, episode_id="ep-7")
        out["reset"] = _text(first.observation)
        low, high, turns = 1, 100, []
        for _ in range(20):
            guess = (low + high) // 2
            result = await env.step({"type": "call_tool", "tool_name": "guess", "arguments": {"number": guess}})
            turns.append([_text(result.observation), result.reward, result.done])
            if result.done:
                break
            low, high = (guess + 1, high) if "higher" in _text(result.observation) else (low, guess - 1)
        out["turns"] = turns
        out["state"] = await env.state()
        await env.reset(seed=4)
        try:
            await env.step({"type": "call_tool", "tool_name": 5})
            out["bad_action"] = "accepted"
        except RuntimeError as exc:  # "Server error: <the server's own words> (code: CODE)": the code
            out["bad_action"] = str(exc).rsplit("(code: ", 1)[-1].rstrip(")")
        after = await env.step({"type": "call_tool", "tool_name": "guess", "arguments": {"number": 50}})  # goes on
        out["after_bad"] = _text(after.observation)
    return out


async def mcp(url: str) -> dict:
    out: dict = {}
    async with MCPToolClient(base_url=url) as env:
        await env.reset(seed=3)
        out["tools"] = sorted(tool.name for tool in await env.list_tools())
        low, high, answers = 1, 100, []
        for _ in range(20):
            guess = (low + high) // 2
            answer = str(await env.call_tool("guess", number=guess))
            answers.append(answer)
            if "correct" in answer:
                break
            low, high = (guess + 1, high) if "higher" in answer else (low, guess - 1)
        out["answers"] = answers
    return out


async def main(url: str) -> None:
    print(json.dumps({"generic": await generic(url), "mcp": await mcp(url)}), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))

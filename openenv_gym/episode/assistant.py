"""The assistant message an action is, for environments that run a model conversation themselves (Verifiers
rollouts, agent programs behind the model endpoint): the policy's reply as {"content", "tool_calls"}.

Text is the message's content; for environments with tools, the tool calls written in the text (any format
toolcalls reads) are made, all of them, in order. An object is {"content", "tool_calls": [OpenAI-style calls]}
(optionally with "completion_ids" and "logprobs": the sampled tokens, kept with the message), or one tool call
{"name", "arguments"}.
"""

from __future__ import annotations

from typing import Any

import orjson

from openenv_gym.episode.toolcalls import normalize_tool_call, parse_tool_calls

TOKEN_KEYS = ("completion_ids", "logprobs")  # what a policy that samples tokens may add to its message


def assistant_message(action: Any, tool_names: set[str], turn: int) -> dict[str, Any] | str:
    """The assistant message an action is ({content, tool_calls}), or a message saying why it is none."""
    if isinstance(action, str):  # every call the text writes, in order, as verifiers plays them all
        calls = parse_tool_calls(action) if tool_names else []
        return {"content": action, "tool_calls": [_tool_call(call, turn, index) for index, call in enumerate(calls)]}
    if not isinstance(action, dict):
        return 'an action is the assistant\'s text, or an object {"content": ..., "tool_calls": [...]}'
    if "content" in action or "tool_calls" in action:
        content, raw_calls = action.get("content"), action.get("tool_calls") or []
    else:
        content, raw_calls = None, [action]
    if content is not None and not isinstance(content, str):
        return "the message's content must be a string"
    if not isinstance(raw_calls, list):
        return "tool_calls must be a list of tool calls"
    calls = []
    for index, raw in enumerate(raw_calls):
        call = normalize_tool_call(raw)
        if call is None:
            return f'tool call {index} is neither {{"name", "arguments"}} nor an OpenAI tool call'
        calls.append(_tool_call(call, turn, index, raw.get("id")))
    message: dict[str, Any] = {"content": content, "tool_calls": calls}
    for key in TOKEN_KEYS:
        value = action.get(key)
        if isinstance(value, list):
            message[key] = value
    return message


def _tool_call(call: dict[str, Any], turn: int, index: int, call_id: Any = None) -> dict[str, str]:
    return {"id": str(call_id or f"call_{turn}_{index}"), "name": call["name"],
            "arguments": orjson.dumps(call["arguments"]).decode()}

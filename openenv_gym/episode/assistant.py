"""The assistant message an action is, for environments that run a model conversation themselves (Verifiers
rollouts, agent programs behind the model endpoint, NeMo Gym servers): the policy's reply as {"content",
"tool_calls"}, with the model's reasoning where it gave some ("reasoning_content").

Text is the message's content; for environments with tools, the tool calls written in the text (any format
toolcalls reads) are made, all of them, in order. An object is {"content", "tool_calls": [OpenAI-style calls]},
optionally with
- "reasoning_content": a thinking model's reasoning ("reasoning", vLLM's name for it from 0.16, is read too), and
  "reasoning_signature" where an Anthropic model signed it, given back to Anthropic's clients as it came;
- "completion_ids" and "logprobs": the sampled tokens (the reasoning's among them), kept with the message, and
  "prompt_tokens": how many tokens the model server counted in the prompt; the program's client reads both counts
  in the answer's usage, as a model server reports them (an agent's ATIF trajectory records them: export.py);
or one tool call {"name", "arguments"}. Such environments say so in their description (ASSISTANT_MESSAGES), and a
rollout gives them the policy's whole turn.
"""

from __future__ import annotations

from typing import Any

import orjson

from openenv_gym.episode.toolcalls import normalize_tool_call, parse_tool_calls

# the description key of environments whose actions are assistant messages: a policy's whole turn may go to them
ASSISTANT_MESSAGES = "assistant_messages"
# ... and of those that may take a message otherwise than it was written (a Verifiers v1 task's response intercept):
# a step's info then has the text it took the message as, where it rewrote it
REWRITES_REPLIES, REPLY_TAKEN = "rewrites_replies", "reply_taken"
TOKEN_KEYS = ("completion_ids", "logprobs")  # what a policy that samples tokens may add to its message
PROMPT_TOKENS = "prompt_tokens"  # and the count of its prompt's tokens
REASONING = "reasoning_content"  # a message's reasoning (vLLM's name before 0.16, and the one every dialect reads)
REASONING_NAMES = (REASONING, "reasoning")  # what a message may call it ("reasoning": vLLM's name from 0.16)
SIGNATURE = "reasoning_signature"  # an Anthropic thinking block's signature, given back to its clients as it came


def assistant_message(action: Any, tool_names: set[str], turn: int) -> dict[str, Any] | str:
    """The assistant message an action is ({content, tool_calls}), or a message saying why it is none."""
    if isinstance(action, str):  # every call the text writes, in order, as verifiers plays them all
        calls = parse_tool_calls(action) if tool_names else []
        return {"content": action, "tool_calls": [_tool_call(call, turn, index) for index, call in enumerate(calls)]}
    if not isinstance(action, dict):
        return 'an action is the assistant\'s text, or an object {"content": ..., "tool_calls": [...]}'
    if "content" in action or "tool_calls" in action or any(name in action for name in REASONING_NAMES):
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
        calls.append(_tool_call(call, turn, index, raw.get("id"), _arguments_text(raw)))
    message: dict[str, Any] = {"content": content, "tool_calls": calls}
    reasoning = reasoning_of(action)
    if reasoning is not None and not isinstance(reasoning, str):
        return f"the message's {REASONING} must be a string"
    if reasoning:
        message[REASONING] = reasoning
        if isinstance(action.get(SIGNATURE), str):
            message[SIGNATURE] = action[SIGNATURE]
    for key in TOKEN_KEYS:
        value = action.get(key)
        if isinstance(value, list):
            message[key] = value
    if isinstance(action.get(PROMPT_TOKENS), int) and not isinstance(action[PROMPT_TOKENS], bool):
        message[PROMPT_TOKENS] = action[PROMPT_TOKENS]
    return message


def token_counts(message: dict[str, Any]) -> tuple[int, int]:
    """(prompt tokens, completion tokens) of an answer, for its usage: what the policy's model server counted, 0
    where the policy sampled no tokens."""
    return message.get(PROMPT_TOKENS, 0), len(message.get("completion_ids") or ())


def conversation_message(message: dict[str, Any]) -> dict[str, Any]:
    """An assistant message read from an action, as a message of a chat-completions conversation."""
    reply: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
    if message.get(REASONING):
        reply[REASONING] = message[REASONING]
    if message.get("tool_calls"):
        reply["tool_calls"] = chat_tool_calls(message)
    return reply


def chat_tool_calls(message: dict[str, Any]) -> list[dict[str, Any]]:
    """An assistant message's tool calls in chat completions' shape."""
    return [{"id": call["id"], "type": "function", "function": {"name": call["name"], "arguments": call["arguments"]}}
            for call in message.get("tool_calls") or ()]


def reasoning_of(message: dict[str, Any]) -> Any:
    """A message's reasoning, under either name (None where it has none)."""
    return next((message[name] for name in REASONING_NAMES if message.get(name) is not None), None)


def _tool_call(call: dict[str, Any], turn: int, index: int, call_id: Any = None, text: str | None = None) \
        -> dict[str, str]:
    """A call of the conversation: its id and arguments' text as the model wrote them, where it gave them."""
    return {"id": str(call_id or f"call_{turn}_{index}"), "name": call["name"],
            "arguments": text if text is not None else orjson.dumps(call["arguments"]).decode()}


def _arguments_text(raw: dict[str, Any]) -> str | None:
    """The arguments of an OpenAI tool call as written (a JSON text), if that is how the call came."""
    function = raw.get("function")
    text = function.get("arguments") if isinstance(function, dict) else raw.get("arguments")
    return text if isinstance(text, str) and text.strip() else None

"""A policy's turn and what it becomes: the env's action, the assistant message, and the message that carries
the env's answer back to the model. One place for these rules, used by the rollout stream and the trainers.

A policy is any async callable `policy(messages, tools) -> Reply | str`: `messages` is the conversation so far
in the OpenAI chat format, `tools` the env's tools as OpenAI function specs (empty for a text env).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from openenv_gym.episode.assistant import PROMPT_TOKENS, REASONING, TOKEN_KEYS
from openenv_gym.episode.results import Action
from openenv_gym.protocol.tool_specs import openai_tool


@dataclass(slots=True)
class ToolCall:
    name: str
    arguments: dict[str, Any]
    id: str = "call_0"


@dataclass(slots=True)
class Reply:
    """What a policy answered: text and/or tool calls, a thinking model's reasoning, and the tokens when the model
    server gives them (the reasoning's among the completion's)."""

    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    reasoning: str | None = None
    prompt_ids: list[int] | None = None
    completion_ids: list[int] | None = None
    logprobs: list[float] | None = None


Policy = Callable[[list[dict[str, Any]], list[dict[str, Any]]], Awaitable["Reply | str"]]


def as_reply(answer: Reply | str) -> Reply:
    if isinstance(answer, Reply):
        return answer
    if isinstance(answer, str):
        return Reply(text=answer)
    raise TypeError(f"a policy must return a Reply or a str, got {type(answer).__name__}")


def action_of(reply: Reply, messages: bool = False) -> Action:
    """The env's action: the first tool call (one env step per turn), else the text, which may hold a tool call
    written out (the env finds it, see episode/toolcalls.py). For an env whose actions are assistant messages (it
    plays a model conversation: `messages`), the turn's message, its reasoning and tokens with it."""
    if messages:  # (the call without its id: the env numbers the calls of its own conversation)
        calls = [{"name": call.name, "arguments": call.arguments} for call in reply.tool_calls[:1]]
        message = {"content": reply.text if reply.text or not calls else None, "tool_calls": calls}
        return message | ({REASONING: reply.reasoning} if reply.reasoning else {}) | _tokens(reply)
    if reply.tool_calls:
        call = reply.tool_calls[0]
        return {"name": call.name, "arguments": call.arguments}
    return reply.text


def assistant_message(reply: Reply) -> dict[str, Any]:
    """The reply as an OpenAI assistant message; only the tool call that was played is kept, so that every call
    in the conversation has its answer."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.text}
    if reply.reasoning:
        message[REASONING] = reply.reasoning
    if reply.tool_calls:
        call = reply.tool_calls[0]
        message["tool_calls"] = [{"id": call.id, "type": "function", "function": {
            "name": call.name, "arguments": orjson.dumps(call.arguments).decode()}}]
    return message


def _tokens(reply: Reply) -> dict[str, Any]:
    """The turn's sampled tokens and its prompt's count, for an env that keeps them with its messages."""
    tokens = {key: value for key in TOKEN_KEYS if (value := getattr(reply, key)) is not None}
    return tokens | ({PROMPT_TOKENS: len(reply.prompt_ids)} if reply.prompt_ids is not None else {})


def observation_message(observation: str, reply: Reply) -> dict[str, Any]:
    """The env's answer to a turn: a tool message when the turn was a tool call, else a user message."""
    if reply.tool_calls:
        call = reply.tool_calls[0]
        return {"role": "tool", "tool_call_id": call.id, "name": call.name, "content": observation}
    return {"role": "user", "content": observation}


def episode_tools(info: dict[str, Any], description: dict[str, Any]) -> list[dict[str, Any]]:
    """An episode's tools, from its reset's info (the task's own, where it has some) or else the env's description,
    as OpenAI function specs: what a policy passes to a model server."""
    return [openai_tool(tool) for tool in info.get("tools") or description.get("tools") or ()]

"""Anthropic's Messages API (`POST /v1/messages`), as the intercepting model endpoint speaks it, sans I/O.

What Claude Code and the `anthropic` package send is read into the endpoint's one request shape (`ChatRequest`:
chat-completions messages and function tools), and the assistant message the policy answers with is written back
as a `message` object (text and `tool_use` blocks) or as its named server-sent events (`message_start`,
`content_block_start` / `_delta` / `_stop`, `message_delta`, `message_stop`). Errors have Anthropic's shape.

Read: `system` as a string or text blocks; messages of `user` and `assistant`, and `system` ones between them (Claude
Code sends one); blocks `text`, `image` and `document` (named in brackets), `tool_use`, `tool_result` (a tool message
each, before the user's text), `thinking` (the assistant message's reasoning, its signature kept as the client sent
it), and what a policy does not read (`redacted_thinking`, server tools' blocks), passed over; `cache_control`
anywhere. Tools with an `input_schema`; server tools (web search) are tolerated and not offered to the policy. A
`tool_result` for a call no assistant message made is refused. A reply's reasoning is a `thinking` block before its
text, signed with the signature the policy gave with it, else with one of ours (clients send it back, and check
nothing of it). Sampled token ids and logprobs have no place in this API: they stay in the episode's trace.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

import orjson

from openenv_gym.episode.assistant import REASONING, SIGNATURE, token_counts
from openenv_gym.protocol.openai_chat import ChatRequest, ChatRequestError, conversation

MESSAGES_PATH = "/v1/messages"
COUNT_TOKENS_PATH = "/v1/messages/count_tokens"
PASSED_OVER = {"redacted_thinking", "server_tool_use", "web_search_tool_result", "web_fetch_tool_result",
               "code_execution_tool_result", "mcp_tool_use", "mcp_tool_result", "container_upload", "search_result"}
NAMED = {"image", "document"}  # read as [image], [document]
ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
               404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error"}


def messages_request(body: Any) -> ChatRequest:
    """The request a program sent; ChatRequestError saying what is wrong if it is not a Messages request."""
    given = conversation(body, "messages", "a Messages API request", "messages")
    messages: list[dict[str, Any]] = []
    system = body.get("system")
    if system:
        messages.append({"role": "system", "content": _text(system, "system")})
    calls: set[str] = set()
    for index, message in enumerate(given):
        where = f"messages.{index}"
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant", "system"):
            raise ChatRequestError(f"{where}: a message is an object whose role is user or assistant", param=where)
        if message["role"] == "assistant":
            messages.append(_assistant(message.get("content"), where, calls))
        else:
            messages += _user(message["role"], message.get("content"), where, calls)
    model = body.get("model", "")
    if not isinstance(model, str):
        raise ChatRequestError("model: must be a string", param="model")
    return ChatRequest(messages, function_tools(body.get("tools") or []), model, body.get("stream") is True,
                       body=body, dialect="anthropic")


def _blocks(content: Any, where: str) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list) or not all(isinstance(block, dict) for block in content):
        raise ChatRequestError(f"{where}.content: a string or a list of content blocks", param=where)
    for index, block in enumerate(content):
        if block.get("type") not in ("text", "tool_use", "tool_result", "thinking", *NAMED, *PASSED_OVER):
            raise ChatRequestError(f"{where}.content.{index}: a content block of type {block.get('type')!r} is not "
                                   "read here (text, image, document, tool_use, tool_result and thinking are)",
                                   param=f"{where}.content.{index}")
    return content


def _text(content: Any, where: str) -> str:
    """The text of blocks (others named in brackets: [image]); thinking and server tools' blocks passed over."""
    parts = []
    for block in _blocks(content, where):
        if block["type"] == "text":
            parts.append(str(block.get("text", "")))
        elif block["type"] in NAMED:
            parts.append(f"[{block['type']}]")
    return "\n".join(parts)


def _assistant(content: Any, where: str, calls: set[str]) -> dict[str, Any]:
    blocks = _blocks(content, where)
    message: dict[str, Any] = {"role": "assistant", "content": _text([b for b in blocks if b["type"] != "tool_use"],
                                                                     where) or None}
    thoughts = [block for block in blocks if block["type"] == "thinking" and isinstance(block.get("thinking"), str)]
    if thoughts:
        message[REASONING] = "\n".join(block["thinking"] for block in thoughts)
        if isinstance(thoughts[-1].get("signature"), str):
            message[SIGNATURE] = thoughts[-1]["signature"]
    uses = [block for block in blocks if block["type"] == "tool_use"]
    if uses:
        message["tool_calls"] = [{"id": str(use.get("id")), "type": "function", "function": {
            "name": str(use.get("name")), "arguments": orjson.dumps(use.get("input") or {}).decode()}}
            for use in uses]
        calls.update(str(use.get("id")) for use in uses)
    return message


def _user(role: str, content: Any, where: str, calls: set[str]) -> list[dict[str, Any]]:
    """A user (or system) message: a tool message for each tool_result, then its other blocks' text."""
    blocks = _blocks(content, where)
    found = []
    for index, block in enumerate(blocks):
        if block["type"] == "tool_result":
            call = block.get("tool_use_id")
            if call not in calls:
                raise ChatRequestError(f"{where}.content.{index}: tool_result for tool_use_id {call!r}, which no "
                                       "assistant message before it called", param=f"{where}.content.{index}")
            result = block.get("content")
            text = _text(result, f"{where}.content.{index}") if result else ""
            found.append({"role": "tool", "tool_call_id": call,
                          "content": f"[error] {text}" if block.get("is_error") else text})
    rest = [block for block in blocks if block["type"] != "tool_result"]
    if rest or not found:
        found.append({"role": role, "content": _text(rest, where)})
    return found


def function_tools(tools: Any) -> list[dict[str, Any]]:
    """The client tools a request offers (those with an input_schema), in chat completions' shape."""
    if not isinstance(tools, list) or not all(isinstance(tool, dict) for tool in tools):
        raise ChatRequestError("tools: must be a list of tools", param="tools")
    return [{"type": "function", "function": {"name": tool["name"], "description": tool.get("description") or "",
                                              "parameters": tool["input_schema"]}}
            for tool in tools if isinstance(tool.get("name"), str) and isinstance(tool.get("input_schema"), dict)]


def count_tokens(body: Any) -> dict[str, int]:
    """`POST /v1/messages/count_tokens`: an estimate (4 characters a token); no turn of the episode."""
    return {"input_tokens": max(1, len(orjson.dumps(body)) // 4)}


# -- answers --------------------------------------------------------------------------------------------

def signature(thinking: str) -> str:
    """A thinking block's signature, where the policy gave none: opaque, as Anthropic's are, and the same for the same
    text (clients only send it back)."""
    return base64.b64encode(hashlib.blake2b(thinking.encode(), digest_size=32).digest()).decode()


def _content(message: dict[str, Any]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if message.get(REASONING):
        blocks.append({"type": "thinking", "thinking": message[REASONING],
                       "signature": message.get(SIGNATURE) or signature(message[REASONING])})
    if message.get("content"):
        blocks.append({"type": "text", "text": message["content"]})
    for call in message.get("tool_calls") or ():
        try:
            arguments = orjson.loads(call["arguments"])
        except orjson.JSONDecodeError:
            arguments = None
        blocks.append({"type": "tool_use", "id": call["id"], "name": call["name"],
                       "input": arguments if isinstance(arguments, dict) else {"arguments": call["arguments"]}})
    return blocks


def _usage(message: dict[str, Any]) -> dict[str, int]:
    prompt, completion = token_counts(message)
    return {"input_tokens": prompt, "output_tokens": completion,
            "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}


def message_object(message: dict[str, Any], model: str, message_id: str) -> dict[str, Any]:
    """The `message` object that answers a non-streaming request with `message`."""
    return {"id": message_id, "type": "message", "role": "assistant", "model": model, "content": _content(message),
            "stop_reason": "tool_use" if message.get("tool_calls") else "end_turn", "stop_sequence": None,
            "usage": _usage(message)}


def message_events(message: dict[str, Any], model: str, message_id: str) -> bytes:
    """The named server-sent events that answer a streaming request with `message`."""
    events: list[bytes] = []

    def event(kind: str, **fields: Any) -> None:
        events.append(b"event: " + kind.encode() + b"\ndata: " + orjson.dumps({"type": kind, **fields}) + b"\n\n")

    whole = message_object(message, model, message_id)
    event("message_start", message={**whole, "content": [], "stop_reason": None,
                                    "usage": {**whole["usage"], "output_tokens": 0}})
    for index, block in enumerate(whole["content"]):
        if block["type"] == "thinking":
            event("content_block_start", index=index, content_block={**block, "thinking": "", "signature": ""})
            event("content_block_delta", index=index, delta={"type": "thinking_delta", "thinking": block["thinking"]})
            event("content_block_delta", index=index, delta={"type": "signature_delta",
                                                             "signature": block["signature"]})
        elif block["type"] == "text":
            event("content_block_start", index=index, content_block={"type": "text", "text": ""})
            event("content_block_delta", index=index, delta={"type": "text_delta", "text": block["text"]})
        else:
            event("content_block_start", index=index, content_block={**block, "input": {}})
            event("content_block_delta", index=index, delta={"type": "input_json_delta",
                                                             "partial_json": orjson.dumps(block["input"]).decode()})
        event("content_block_stop", index=index)
    event("message_delta", delta={"stop_reason": whole["stop_reason"], "stop_sequence": None},
          usage={"output_tokens": whole["usage"]["output_tokens"]})
    event("message_stop")
    return b"".join(events)


def error_body(status: int, message: str) -> dict[str, Any]:
    """Anthropic's error object, which its clients turn into their exceptions."""
    return {"type": "error", "error": {"type": ERROR_TYPES.get(status, "api_error"), "message": message}}

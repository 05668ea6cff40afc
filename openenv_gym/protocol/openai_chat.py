"""OpenAI's chat completions shapes, as the intercepting model endpoint speaks them, sans I/O.

A program under training asks `POST /v1/chat/completions`; the request it sends is read here (`chat_request`:
its messages, tools, model, whether it streams), and the assistant message the policy answers with is written
back either as one `chat.completion` object (`completion`) or as server-sent events (`completion_events`: the
role, the content, each tool call, the finish, the usage when `stream_options.include_usage` asks, `[DONE]`).
Errors have OpenAI's shape (`error_body`), so the program's own client raises its usual exception.

An assistant message here is {"content": str | None, "tool_calls": [{"id", "name", "arguments": JSON text}]},
optionally with "reasoning_content" (a thinking model's reasoning), "completion_ids" and "logprobs" (the sampled
tokens' ids and logprobs, when the policy has them), which are written where vLLM writes them: the reasoning as
`reasoning_content`, and as `reasoning` too (vLLM's name from 0.16; clients read one or the other). A request's
assistant messages that carry reasoning under either name are read with it as `reasoning_content`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import orjson

from openenv_gym.episode.assistant import REASONING, chat_tool_calls, token_counts
from openenv_gym.protocol.tool_specs import as_tools

CHAT_PATH = "/v1/chat/completions"
MODELS_PATH = "/v1/models"
MAX_MESSAGES = 10_000  # messages one request may carry (the body's size is bounded by the server)


class ChatRequestError(ValueError):
    """A request the endpoint refuses; `status` and `kind` are OpenAI's (400 invalid_request_error, ...)."""

    def __init__(self, message: str, status: int = 400, kind: str = "invalid_request_error",
                 param: str | None = None) -> None:
        super().__init__(message)
        self.status, self.kind, self.param = status, kind, param


@dataclass(slots=True)
class ChatRequest:
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] = field(default_factory=list)
    model: str = ""
    stream: bool = False
    include_usage: bool = False
    body: dict[str, Any] = field(default_factory=dict)  # the whole request, as the program sent it
    dialect: str = "chat"  # the API the program speaks: chat, responses, anthropic, gemini (protocol/dialects.py)
    trace: str = ""  # the trace (one agent's run) the client says the request is of: its X-Session-ID (Verifiers')

    def info(self) -> dict[str, Any]:
        """What a session's info shows of the request: one shape, whatever API the program speaks (its tools too:
        protocol/tool_specs.py)."""
        return {"messages": self.messages, "tools": as_tools(self.tools), "dialect": self.dialect}

    @property
    def last_text(self) -> str:
        """What the observation shows: the text of the last message that is not a system one (Claude Code puts a
        system message after the user's)."""
        said = [message for message in self.messages if message.get("role") != "system"] or self.messages
        return message_text(said[-1]) if said else ""


def conversation(body: Any, key: str, request: str, entries: str) -> list[Any]:
    """`body[key]`, the conversation of a request of any API: a non-empty list of at most MAX_MESSAGES `entries`;
    ChatRequestError saying what is wrong (`request`: what the body should have been)."""
    if not isinstance(body, dict):
        raise ChatRequestError(f"the body must be a JSON object, {request}")
    found = body.get(key)
    if not isinstance(found, list) or not found:
        raise ChatRequestError(f"'{key}' must be a non-empty list of {entries}", param=key)
    if len(found) > MAX_MESSAGES:
        raise ChatRequestError(f"'{key}' has {len(found)} {entries}; at most {MAX_MESSAGES}", param=key)
    return found


def chat_request(body: Any) -> ChatRequest:
    """The request a program sent; ChatRequestError saying what is wrong if it is not a chat completion request."""
    messages = conversation(body, "messages", "a chat completion request", "messages")
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise ChatRequestError(f"messages[{index}] must be an object with a 'role'", param=f"messages[{index}]")
        if REASONING not in message and isinstance(message.get("reasoning"), str):  # (vLLM 0.16's name for it)
            messages = messages if messages is not body["messages"] else list(messages)  # (the body's, untouched)
            messages[index] = {**message, REASONING: message["reasoning"]}
    tools = body.get("tools") or []
    if not isinstance(tools, list) or not all(isinstance(tool, dict) for tool in tools):
        raise ChatRequestError("'tools' must be a list of tool objects", param="tools")
    if body.get("n", 1) != 1:
        raise ChatRequestError("this endpoint answers one choice per request: leave 'n' at 1", param="n")
    model = body.get("model", "")
    if not isinstance(model, str):
        raise ChatRequestError("'model' must be a string", param="model")
    stream = body.get("stream") is True
    options = body.get("stream_options")
    include_usage = stream and isinstance(options, dict) and options.get("include_usage") is True
    return ChatRequest(messages, tools, model, stream, include_usage, body)


def message_text(message: dict[str, Any]) -> str:
    """A message's text: its content string, or its text parts joined (other parts named in brackets)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    parts = []
    for part in content if isinstance(content, list) else ():
        if isinstance(part, dict):
            parts.append(part.get("text", "") if part.get("type") == "text" else f"[{part.get('type', 'part')}]")
    return "\n".join(parts)


def tool_names(tools: list[dict[str, Any]]) -> set[str]:
    """The names of a request's tools (OpenAI's {"type": "function", "function": {"name"}} or a bare {"name"})."""
    names = set()
    for tool in tools:
        function = tool.get("function") if isinstance(tool.get("function"), dict) else tool
        if isinstance(function.get("name"), str):
            names.add(function["name"])
    return names


# -- answers --------------------------------------------------------------------------------------------

def _finish_reason(message: dict[str, Any]) -> str:
    return "tool_calls" if message.get("tool_calls") else "stop"


def _usage(message: dict[str, Any]) -> dict[str, int]:
    prompt, completion = token_counts(message)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _logprobs(message: dict[str, Any]) -> dict[str, Any] | None:
    logprobs = message.get("logprobs")
    if not logprobs:
        return None
    ids = message.get("completion_ids") or [None] * len(logprobs)
    return {"content": [{"token": f"token_id:{token}", "logprob": value, "bytes": None, "top_logprobs": []}
                        for token, value in zip(ids, logprobs, strict=False)]}


def _reasoning(message: dict[str, Any]) -> dict[str, str]:
    """The message's reasoning as vLLM's servers write it, under both of their names."""
    reasoning = message.get(REASONING)
    return {REASONING: reasoning, "reasoning": reasoning} if reasoning else {}


def completion(message: dict[str, Any], model: str, completion_id: str) -> dict[str, Any]:
    """The `chat.completion` object that answers a non-streaming request with `message`."""
    wire: dict[str, Any] = {"role": "assistant", "content": message.get("content"), **_reasoning(message)}
    calls = chat_tool_calls(message)
    if calls:
        wire["tool_calls"] = calls
    choice: dict[str, Any] = {"index": 0, "message": wire, "finish_reason": _finish_reason(message),
                              "logprobs": _logprobs(message)}
    if message.get("completion_ids") is not None:
        choice["token_ids"] = message["completion_ids"]
    return {"id": completion_id, "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [choice], "usage": _usage(message)}


def completion_events(message: dict[str, Any], model: str, completion_id: str, include_usage: bool) -> bytes:
    """The server-sent events that answer a streaming request with `message`, ending with `data: [DONE]`."""
    head = {"id": completion_id, "object": "chat.completion.chunk", "created": int(time.time()), "model": model}

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish, **extra}
        return b"data: " + orjson.dumps({**head, "choices": [choice]}) + b"\n\n"

    events = [chunk({"role": "assistant", "content": ""})]
    if message.get(REASONING):
        events.append(chunk(_reasoning(message)))
    if message.get("content"):
        extra = {"logprobs": _logprobs(message)} if message.get("logprobs") else {}
        if message.get("completion_ids") is not None:
            extra["token_ids"] = message["completion_ids"]
        events.append(chunk({"content": message["content"]}, **extra))
    for index, call in enumerate(chat_tool_calls(message)):
        events.append(chunk({"tool_calls": [{"index": index, **call}]}))
    events.append(chunk({}, _finish_reason(message)))
    if include_usage:
        events.append(b"data: " + orjson.dumps({**head, "choices": [], "usage": _usage(message)}) + b"\n\n")
    events.append(b"data: [DONE]\n\n")
    return b"".join(events)


def models_list(model: str) -> dict[str, Any]:
    """`GET /v1/models`: the one model served."""
    return {"object": "list", "data": [{"id": model, "object": "model", "created": 0, "owned_by": "openenv-gym"}]}


def error_body(message: str, kind: str = "invalid_request_error", code: str | None = None,
               param: str | None = None) -> dict[str, Any]:
    """OpenAI's error object, which its clients turn into their exceptions."""
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}

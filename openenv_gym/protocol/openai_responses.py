"""OpenAI's Responses API (`POST /v1/responses`), as the intercepting model endpoint speaks it, sans I/O.

What Codex CLI and `client.responses.create` send is read into the endpoint's one request shape (`ChatRequest`:
chat-completions messages and function tools, whatever the dialect), and the assistant message the policy answers
with is written back as a `response` object or as its typed server-sent events (`response.created` ...
`response.completed`, each with its `sequence_number`; no `[DONE]`). Errors are OpenAI's, as for chat.

Input items: `message` (any role; `developer` is a system message), `function_call` (an assistant's tool call),
`function_call_output` (its result), `custom_tool_call` and its output (a tool that takes text), `reasoning` (the
reasoning of the assistant message it comes before: its summary's text, else its content's), and what clients
replay that a policy does not read (hosted tools' calls): kept in the request's body, not in its messages. Tools:
`function`, and functions inside a `namespace`; hosted ones (`web_search`) are tolerated, and not offered to the
policy, which could not run them. A reply's reasoning is a `reasoning` item with its summary, before its message and
calls, as NeMo Gym's model servers write it. Sampled token ids and logprobs go on the last output item as NeMo Gym
puts them (`generation_token_ids`, `generation_log_probs`) and on the text as OpenAI's `logprobs`.
"""

from __future__ import annotations

import time
from typing import Any

import orjson

from openenv_gym.episode.assistant import REASONING, token_counts
from openenv_gym.protocol.openai_chat import MAX_MESSAGES, ChatRequest, ChatRequestError

RESPONSES_PATH = "/v1/responses"
PASSED_OVER = {"item_reference", "web_search_call", "file_search_call", "computer_call",
               "computer_call_output", "image_generation_call", "code_interpreter_call", "mcp_call",
               "mcp_list_tools", "mcp_approval_request", "mcp_approval_response", "compaction"}
TOOL_CALLS = {"function_call", "custom_tool_call", "local_shell_call"}
TOOL_OUTPUTS = {"function_call_output", "custom_tool_call_output", "local_shell_call_output"}


def responses_request(body: Any, earlier: list[dict[str, Any]] | None = None) -> ChatRequest:
    """The request a program sent; `earlier`: the conversation its `previous_response_id` names (messages and the
    reply), which this one goes on from. ChatRequestError saying what is wrong if it is not a Responses request."""
    if not isinstance(body, dict):
        raise ChatRequestError("the body must be a JSON object, a Responses API request")
    items = body.get("input")
    if isinstance(items, str):
        items = [{"type": "message", "role": "user", "content": items}]
    if not isinstance(items, list) or not (items or earlier):
        raise ChatRequestError("'input' must be a string or a non-empty list of items", param="input")
    if len(items) > MAX_MESSAGES:
        raise ChatRequestError(f"'input' has {len(items)} items; at most {MAX_MESSAGES}", param="input")
    messages = list(earlier or [])
    instructions = body.get("instructions")
    if isinstance(instructions, str) and instructions and not earlier:
        messages.append({"role": "system", "content": instructions})
    for index, item in enumerate(items):
        _add_item(messages, item, f"input[{index}]")
    model = body.get("model") or ""  # (null where a dataset's rows leave it to the server, as NeMo Gym's do)
    if not isinstance(model, str):
        raise ChatRequestError("'model' must be a string", param="model")
    return ChatRequest(messages, function_tools(body.get("tools") or []), model, body.get("stream") is True,
                       body=body, dialect="responses")


def _add_item(messages: list[dict[str, Any]], item: Any, where: str) -> None:
    if not isinstance(item, dict):
        raise ChatRequestError(f"{where} must be an object, an input item", param=where)
    kind = item.get("type", "message" if "role" in item else None)
    if kind == "message":
        role = item.get("role")
        if role not in ("user", "assistant", "system", "developer"):
            raise ChatRequestError(f"{where}.role must be user, assistant, system or developer", param=where)
        text = _text(item.get("content"), where)
        last = messages[-1] if messages else None
        if role == "assistant" and _reasoning_alone(last):  # (the message its reasoning came before)
            messages[-1] = {**last, "content": text}  # (a copy: the last may be a remembered conversation's)
        else:
            messages.append({"role": "system" if role == "developer" else role, "content": text})
    elif kind == "reasoning":
        text = _reasoning_text(item, where)
        last = messages[-1] if messages else None
        if text and _reasoning_alone(last):  # (a reasoning of several items)
            messages[-1] = {**last, REASONING: f"{last[REASONING]}\n{text}"}
        elif text:
            messages.append({"role": "assistant", "content": None, REASONING: text})
    elif kind in TOOL_CALLS:
        name = item.get("name") or ("shell" if kind == "local_shell_call" else None)
        arguments = item.get("arguments") if kind == "function_call" else \
            orjson.dumps({"input": item.get("input")} if kind == "custom_tool_call" else item.get("action")).decode()
        if not isinstance(name, str) or not isinstance(arguments, str):
            raise ChatRequestError(f"{where}: a {kind} needs its 'name' and 'arguments' (a JSON string)", param=where)
        call = {"id": str(item.get("call_id") or item.get("id") or f"call_{len(messages)}"), "type": "function",
                "function": {"name": name, "arguments": arguments}}
        last = messages[-1] if messages else None
        if last is not None and last["role"] == "assistant":  # (the calls of one reply: one message)
            messages[-1] = {**last, "tool_calls": [*last.get("tool_calls", ()), call]}
        else:
            messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
    elif kind in TOOL_OUTPUTS:
        if not isinstance(item.get("call_id"), str):
            raise ChatRequestError(f"{where}: a {kind} needs the 'call_id' of its call", param=where)
        if not any(call["id"] == item["call_id"] for message in messages for call in message.get("tool_calls") or ()):
            raise ChatRequestError(f"{where}: a {kind} for call_id {item['call_id']!r}, which no function call before "
                                   "it made", param=where)
        messages.append({"role": "tool", "tool_call_id": item["call_id"], "content": _text(item.get("output"), where)})
    elif kind not in PASSED_OVER:
        raise ChatRequestError(f"{where}: an input item of type {kind!r} is not read here (message, function_call, "
                               "function_call_output, custom_tool_call and their outputs are; reasoning and hosted "
                               "tools' items are passed over)", param=where)


def _reasoning_alone(message: dict[str, Any] | None) -> bool:
    """Whether a message is the reasoning of an assistant message to come, and nothing else yet."""
    return message is not None and message["role"] == "assistant" and message.get("content") is None \
        and not message.get("tool_calls") and REASONING in message


def _reasoning_text(item: dict[str, Any], where: str) -> str:
    """A reasoning item's text: its summary's, else its content's (reasoning_text parts: vLLM's gpt-oss)."""
    for key in ("summary", "content"):
        parts = item.get(key)
        if parts and not isinstance(parts, list):
            raise ChatRequestError(f"{where}.{key} must be a list of text parts", param=where)
        if parts:
            return _text(parts, f"{where}.{key}")
    return ""


def _text(content: Any, where: str) -> str:
    """A content's text: a string, or its text parts joined (others named in brackets: [input_image])."""
    if content is None or isinstance(content, str):
        return content or ""
    if not isinstance(content, list):
        raise ChatRequestError(f"{where}.content must be a string or a list of content parts", param=where)
    parts = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        parts.append(part.get("text", "") if kind in ("input_text", "output_text", "text", "summary_text",
                                                      "reasoning_text")
                     else f"[{kind or 'part'}]")
    return "".join(parts)


def function_tools(tools: Any) -> list[dict[str, Any]]:
    """The function tools a request offers, in chat completions' shape (those in a namespace too)."""
    if not isinstance(tools, list):
        raise ChatRequestError("'tools' must be a list of tools", param="tools")
    found = []
    for tool in tools:
        if not isinstance(tool, dict):
            raise ChatRequestError("'tools' must be a list of tool objects", param="tools")
        if tool.get("type") == "namespace":
            found += function_tools(tool.get("tools") or [])
        elif tool.get("type") in ("function", "custom") and isinstance(tool.get("name"), str):
            parameters = tool.get("parameters") if tool.get("type") == "function" else {
                "type": "object", "properties": {"input": {"type": "string"}}, "required": ["input"]}
            found.append({"type": "function", "function": {"name": tool["name"],
                                                           "description": tool.get("description") or "",
                                                           "parameters": parameters or {"type": "object"}}})
    return found


# -- answers --------------------------------------------------------------------------------------------

def output_items(message: dict[str, Any], response_id: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if message.get(REASONING):
        items.append({"id": f"rs_{response_id}", "type": "reasoning", "encrypted_content": None,
                      "summary": [{"type": "summary_text", "text": message[REASONING]}]})
    if message.get("content"):
        part: dict[str, Any] = {"type": "output_text", "text": message["content"], "annotations": []}
        if message.get("logprobs"):
            ids = message.get("completion_ids") or [None] * len(message["logprobs"])
            part["logprobs"] = [{"token": f"token_id:{token}", "logprob": value, "bytes": [], "top_logprobs": []}
                                for token, value in zip(ids, message["logprobs"], strict=False)]
        items.append({"type": "message", "id": f"msg_{response_id}", "status": "completed", "role": "assistant",
                      "content": [part]})
    for index, call in enumerate(message.get("tool_calls") or ()):
        items.append({"type": "function_call", "id": f"fc_{response_id}_{index}", "call_id": call["id"],
                      "name": call["name"], "arguments": call["arguments"], "status": "completed"})
    if items and message.get("completion_ids") is not None:  # (on the last item, where NeMo Gym's servers put them)
        items[-1]["generation_token_ids"] = message["completion_ids"]
        items[-1]["generation_log_probs"] = message.get("logprobs") or []
    return items


def response_object(message: dict[str, Any], model: str, response_id: str, request: ChatRequest,
                    status: str = "completed") -> dict[str, Any]:
    """The `response` object that answers `request` with `message`."""
    prompt, completion = token_counts(message)
    body = request.body
    return {"id": response_id, "object": "response", "created_at": int(time.time()), "status": status,
            "model": model, "output": output_items(message, response_id) if status == "completed" else [],
            "parallel_tool_calls": body.get("parallel_tool_calls", True), "tool_choice": body.get("tool_choice",
                                                                                                  "auto"),
            "tools": body.get("tools") or [], "previous_response_id": body.get("previous_response_id"),
            "error": None, "incomplete_details": None, "instructions": body.get("instructions"),
            "metadata": body.get("metadata") or {}, "temperature": body.get("temperature"),
            "top_p": body.get("top_p"), "text": {"format": {"type": "text"}}, "truncation": "disabled",
            "usage": {"input_tokens": prompt, "input_tokens_details": {"cached_tokens": 0},
                      "output_tokens": completion, "output_tokens_details": {"reasoning_tokens": 0},
                      "total_tokens": prompt + completion}}


def response_events(message: dict[str, Any], model: str, response_id: str, request: ChatRequest) -> bytes:
    """The typed server-sent events that answer a streaming `request` with `message`."""
    events: list[bytes] = []

    def event(kind: str, **fields: Any) -> None:
        data = orjson.dumps({"type": kind, "sequence_number": len(events), **fields})
        events.append(b"event: " + kind.encode() + b"\ndata: " + data + b"\n\n")

    started = response_object(message, model, response_id, request, status="in_progress")
    event("response.created", response=started)
    event("response.in_progress", response=started)
    for index, item in enumerate(output_items(message, response_id)):
        if item["type"] == "reasoning":
            part = item["summary"][0]
            event("response.output_item.added", output_index=index, item={**item, "summary": []})
            where = {"item_id": item["id"], "output_index": index, "summary_index": 0}
            event("response.reasoning_summary_part.added", **where, part={**part, "text": ""})
            event("response.reasoning_summary_text.delta", **where, delta=part["text"])
            event("response.reasoning_summary_text.done", **where, text=part["text"])
            event("response.reasoning_summary_part.done", **where, part=part)
        elif item["type"] == "message":
            part = item["content"][0]
            event("response.output_item.added", output_index=index, item={**item, "status": "in_progress",
                                                                          "content": []})
            event("response.content_part.added", item_id=item["id"], output_index=index, content_index=0,
                  part={"type": "output_text", "text": "", "annotations": []})
            event("response.output_text.delta", item_id=item["id"], output_index=index, content_index=0,
                  delta=part["text"], logprobs=part.get("logprobs", []))
            event("response.output_text.done", item_id=item["id"], output_index=index, content_index=0,
                  text=part["text"], logprobs=part.get("logprobs", []))
            event("response.content_part.done", item_id=item["id"], output_index=index, content_index=0, part=part)
        else:
            event("response.output_item.added", output_index=index, item={**item, "status": "in_progress",
                                                                          "arguments": ""})
            event("response.function_call_arguments.delta", item_id=item["id"], output_index=index,
                  delta=item["arguments"])
            event("response.function_call_arguments.done", item_id=item["id"], output_index=index,
                  arguments=item["arguments"])
        event("response.output_item.done", output_index=index, item=item)
    event("response.completed", response=response_object(message, model, response_id, request))
    return b"".join(events)

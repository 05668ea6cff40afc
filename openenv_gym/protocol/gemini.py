"""Google's Gemini API (`POST /v1beta/models/{model}:generateContent`, `:streamGenerateContent`), as the
intercepting model endpoint speaks it, sans I/O.

What Gemini CLI and the `google-genai` package send is read into the endpoint's one request shape (`ChatRequest`),
and the policy's assistant message is written back as a `GenerateContentResponse` (a candidate whose parts are
text and `functionCall`s), whole or as `data:` server-sent events; whether it streams is the URL's to say, never
the body's. Errors have Google's shape (`{"error": {"code", "message", "status"}}`).

Read: `systemInstruction`; `contents` of roles `user` and `model`, with parts `text`, `functionCall`,
`functionResponse` (a tool message, matched to its call by id, else by name), `inlineData` and `fileData` (named in
brackets), and thoughts (text parts marked `thought`: a model turn's reasoning); `tools[].functionDeclarations`
(others, such as `googleSearch`, tolerated and not offered to the policy). A reply's reasoning is a text part marked
`thought`, before its text. Sampled logprobs go where Gemini puts them (`logprobsResult.chosenCandidates`).
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from openenv_gym.episode.assistant import REASONING, token_counts
from openenv_gym.protocol.openai_chat import ChatRequest, ChatRequestError, conversation

ROUTE = re.compile(r"^/v1(?:beta|alpha)?/models/(?P<model>[^/:]+):(?P<method>generateContent|"
                   r"streamGenerateContent|countTokens)$")
STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
          409: "ABORTED", 410: "FAILED_PRECONDITION", 413: "INVALID_ARGUMENT", 429: "RESOURCE_EXHAUSTED"}


def route(path: str) -> tuple[str, str] | None:
    """(model, method) of a Gemini path, or None."""
    found = ROUTE.match(path)
    return (found["model"], found["method"]) if found else None


def gemini_request(body: Any, model: str, stream: bool) -> ChatRequest:
    """The request a program sent to `model` (the path's); ChatRequestError if it is not a Gemini request."""
    contents = conversation(body, "contents", "a GenerateContentRequest", "contents")
    messages: list[dict[str, Any]] = []
    system = body.get("systemInstruction") or body.get("system_instruction")
    if system:
        messages.append({"role": "system", "content": _text(_parts(system, "systemInstruction"))})
    pending: list[dict[str, Any]] = []  # calls without an answer yet
    for index, content in enumerate(contents):
        where = f"contents[{index}]"
        parts = _parts(content, where)
        if isinstance(content, dict) and content.get("role") == "model":
            messages.append(_model_turn(parts, len(messages), pending))
        else:
            messages += _user_turn(parts, where, pending)
    return ChatRequest(messages, function_tools(body.get("tools") or []), model, stream, body=body, dialect="gemini")


def _parts(content: Any, where: str) -> list[dict[str, Any]]:
    parts = content.get("parts") if isinstance(content, dict) else None
    if not isinstance(parts, list) or not all(isinstance(part, dict) for part in parts):
        raise ChatRequestError(f"{where}: a content is an object with a list of parts", param=where)
    for index, part in enumerate(parts):
        if not part.keys() & {"text", "functionCall", "functionResponse", "inlineData", "fileData", "thought",
                              "executableCode", "codeExecutionResult", "thoughtSignature"}:
            raise ChatRequestError(f"{where}.parts[{index}]: a part of kind {sorted(part)} is not read here (text, "
                                   "functionCall, functionResponse, inlineData and fileData are)",
                                   param=f"{where}.parts[{index}]")
    return parts


def _text(parts: list[dict[str, Any]]) -> str:
    found = []
    for part in parts:
        if isinstance(part.get("text"), str) and not part.get("thought"):
            found.append(part["text"])
        elif "inlineData" in part or "fileData" in part:
            found.append("[inlineData]" if "inlineData" in part else "[fileData]")
    return "".join(found)


def _model_turn(parts: list[dict[str, Any]], position: int, pending: list[dict[str, Any]]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": _text(parts) or None}
    thoughts = [part["text"] for part in parts if part.get("thought") and isinstance(part.get("text"), str)]
    if thoughts:
        message[REASONING] = "".join(thoughts)
    calls = []
    for index, part in enumerate(parts):
        call = part.get("functionCall")
        if isinstance(call, dict) and isinstance(call.get("name"), str):
            arguments = orjson.dumps(call.get("args") or {}).decode()
            calls.append({"id": str(call.get("id") or f"call_{position}_{index}"), "type": "function",
                          "function": {"name": call["name"], "arguments": arguments}})
    if calls:
        message["tool_calls"] = calls
        pending += calls
    return message


def _user_turn(parts: list[dict[str, Any]], where: str, pending: list[dict[str, Any]]) -> list[dict[str, Any]]:
    found = []
    for index, part in enumerate(parts):
        answer = part.get("functionResponse")
        if not isinstance(answer, dict):
            continue
        call = next((call for call in pending if answer.get("id") and call["id"] == answer["id"]), None) or \
            next((call for call in pending if call["function"]["name"] == answer.get("name")), None)
        if call is None:
            raise ChatRequestError(f"{where}.parts[{index}]: a functionResponse for {answer.get('name')!r}, which no "
                                   "model turn before it called", param=f"{where}.parts[{index}]")
        pending.remove(call)
        response = answer.get("response")
        text = response.get("output") if isinstance(response, dict) and isinstance(response.get("output"), str) \
            else orjson.dumps(response).decode()
        found.append({"role": "tool", "tool_call_id": call["id"], "content": text})
    rest = [part for part in parts if "functionResponse" not in part]
    if rest or not found:
        found.append({"role": "user", "content": _text(rest)})
    return found


def function_tools(tools: Any) -> list[dict[str, Any]]:
    """The function declarations a request offers, in chat completions' shape."""
    if not isinstance(tools, list) or not all(isinstance(tool, dict) for tool in tools):
        raise ChatRequestError("tools: must be a list of tools", param="tools")
    return [{"type": "function", "function": {
        "name": declaration["name"], "description": declaration.get("description") or "",
        "parameters": declaration.get("parametersJsonSchema") or declaration.get("parameters_json_schema")
        or declaration.get("parameters") or {"type": "object"}}}  # (google-genai 3 sends the snake_case spelling)
        for tool in tools for declaration in tool.get("functionDeclarations") or tool.get("function_declarations")
        or () if isinstance(declaration, dict) and isinstance(declaration.get("name"), str)]


def count_tokens(body: Any) -> dict[str, int]:
    """`:countTokens`: an estimate (4 characters a token); no turn of the episode."""
    return {"totalTokens": max(1, len(orjson.dumps(body)) // 4)}


# -- answers --------------------------------------------------------------------------------------------

def content_response(message: dict[str, Any], model: str, response_id: str) -> dict[str, Any]:
    """The `GenerateContentResponse` that answers a request with `message`."""
    parts: list[dict[str, Any]] = [{"text": message[REASONING], "thought": True}] if message.get(REASONING) else []
    if message.get("content"):
        parts.append({"text": message["content"]})
    for call in message.get("tool_calls") or ():
        try:
            arguments = orjson.loads(call["arguments"])
        except orjson.JSONDecodeError:
            arguments = None
        parts.append({"functionCall": {"id": call["id"], "name": call["name"],
                                       "args": arguments if isinstance(arguments, dict) else
                                       {"arguments": call["arguments"]}}})
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
    if message.get("logprobs"):
        ids = message.get("completion_ids") or [None] * len(message["logprobs"])
        candidate["logprobsResult"] = {"topCandidates": [], "chosenCandidates": [
            {"token": f"token_id:{token}", "tokenId": token, "logProbability": value}
            for token, value in zip(ids, message["logprobs"], strict=False)]}
        candidate["avgLogprobs"] = sum(message["logprobs"]) / len(message["logprobs"])
    prompt, output = token_counts(message)
    return {"candidates": [candidate], "modelVersion": model, "responseId": response_id,
            "usageMetadata": {"promptTokenCount": prompt, "candidatesTokenCount": output,
                              "totalTokenCount": prompt + output}}


def content_events(message: dict[str, Any], model: str, response_id: str) -> bytes:
    """The `data:` server-sent events of a streamed answer: one chunk, whole (no [DONE]: Gemini has none)."""
    return b"data: " + orjson.dumps(content_response(message, model, response_id)) + b"\r\n\r\n"


def error_body(status: int, message: str) -> dict[str, Any]:
    """Google's error object."""
    return {"error": {"code": status, "message": message, "status": STATUS.get(status, "INTERNAL")}}

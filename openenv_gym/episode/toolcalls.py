"""Find a tool call in raw model text.

Models write tool calls in a handful of formats; this module recognises the common ones and returns
`{"name": ..., "arguments": {...}}`, or None when the text holds no tool call:

- Hermes / Qwen:  <tool_call>{"name": "guess", "arguments": {"number": 3}}</tool_call>
- Llama 3.1 JSON: {"name": "guess", "parameters": {"number": 3}}
- OpenAI:         {"type": "function", "function": {"name": "guess", "arguments": "{\"number\": 3}"}}
- Llama 3.1 tag:  <function=guess>{"number": 3}</function>
- Pythonic:       guess(number=3)   or   [guess(number=3)]
- Mistral:        [TOOL_CALLS] [{"name": "guess", "arguments": {"number": 3}}]
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Collection
from typing import Any

import orjson

ToolCall = dict[str, Any]

_FUNCTION_TAG = re.compile(r"<function=([\w.-]+)>\s*(.*?)\s*</function>", re.DOTALL)
_TOOL_CALL_TAG = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)
_JSON_START = re.compile(r"[{\[]")
_DECODER = json.JSONDecoder()
_PYTHONIC = re.compile(r"\[?\s*([A-Za-z_]\w*)\s*\((.*)\)\s*\]?\s*$", re.DOTALL)


def normalize_tool_call(obj: object) -> ToolCall | None:
    """Accept the JSON shapes of a tool call; return {"name", "arguments"} or None."""
    if isinstance(obj, list) and obj:
        obj = obj[0]
    if not isinstance(obj, dict):
        return None
    if isinstance(obj.get("function"), dict):  # OpenAI tool_calls entry
        obj = obj["function"]
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        return None
    arguments = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(arguments, str):  # OpenAI sends arguments as a JSON string
        try:
            arguments = orjson.loads(arguments) if arguments.strip() else {}
        except orjson.JSONDecodeError:
            return None
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        return None
    return {"name": name, "arguments": arguments}


def _loads(text: str) -> object:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return None


def _json_values(text: str):
    """Yield each JSON object or array that starts at a '{' or '[' in text."""
    for match in _JSON_START.finditer(text):
        try:
            value, _ = _DECODER.raw_decode(text, match.start())
        except ValueError:
            continue
        yield value


def _pythonic(text: str) -> ToolCall | None:
    match = _PYTHONIC.search(text.strip())
    if not match:
        return None
    try:
        call = ast.parse(f"{match.group(1)}({match.group(2)})", mode="eval").body
    except SyntaxError:
        return None
    if not isinstance(call, ast.Call) or call.args:
        return None
    try:
        arguments = {kw.arg: ast.literal_eval(kw.value) for kw in call.keywords if kw.arg}
    except (ValueError, SyntaxError):
        return None
    return {"name": match.group(1), "arguments": arguments}


def find_tool_call(action: object, tool_names: Collection[str]) -> ToolCall | str:
    """The tool call an action makes (a call object or model text), or a message saying why there is none."""
    listed = ", ".join(tool_names)
    if isinstance(action, str):
        call = parse_tool_call(action)
        if call is None:
            return f"no tool call found in the text; call one of: {listed}"
    else:
        call = normalize_tool_call(action)
        if call is None:
            return f'a tool call is an object {{"name": <tool>, "arguments": {{...}}}}; tools: {listed}'
    if call["name"] not in tool_names:
        return f"unknown tool {call['name']!r}; call one of: {listed}"
    return call


def parse_tool_call(text: str) -> ToolCall | None:
    """Return the first tool call found in text, or None."""
    for body in _TOOL_CALL_TAG.findall(text):
        call = normalize_tool_call(_loads(body))
        if call:
            return call
    match = _FUNCTION_TAG.search(text)
    if match:
        arguments = _loads(match.group(2)) if match.group(2) else {}
        if isinstance(arguments, dict):
            return {"name": match.group(1), "arguments": arguments}
    for value in _json_values(text):
        call = normalize_tool_call(value)
        if call:
            return call
    return _pythonic(text)

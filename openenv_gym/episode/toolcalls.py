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

from openenv_gym.runtime.pyparse import parse

ToolCall = dict[str, Any]

# Every scan here is linear in the text: model text is untrusted, and a quadratic scan of 40,000 characters
# froze a server worker for seconds. Possessive quantifiers (*+) never backtrack.
_FUNCTION_NAME = re.compile(r"[\w.-]++>")
_JSON_START = re.compile(r"\{(?=\s*+\")|\[(?=\s*+\{)")  # an object with a key, or an array of objects
_DECODER = json.JSONDecoder()
_CALL_NAME = re.compile(r"\b([A-Za-z_]\w*+)\s*+\(")
JSON_ATTEMPTS = 32  # JSON values tried per text, each a scan of the rest of it: a bound on the work


def normalize_tool_call(obj: object) -> ToolCall | None:
    """Accept the JSON shapes of a tool call; return {"name", "arguments"} or None."""
    if type(obj) is dict and "function" not in obj:  # the usual shape, checked first: this runs on every step
        name, arguments = obj.get("name"), obj.get("arguments")
        if type(name) is str and name and type(arguments) is dict:
            return {"name": name, "arguments": arguments}
    if isinstance(obj, list) and obj:
        obj = obj[0]
    if not isinstance(obj, dict):
        return None
    if isinstance(obj.get("function"), dict):  # OpenAI tool_calls entry
        obj = obj["function"]
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        return None
    arguments = obj["arguments"] if "arguments" in obj else obj.get("parameters", {})
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
    except orjson.JSONDecodeError:  # orjson refuses nesting deeper than 1024 instead of recursing
        return None


def _tagged(text: str, opening: str, closing: str) -> list[str]:
    """The body of each `opening ... closing` span, left to right, each up to the first `closing` after it (as a
    lazy regex would), in one pass."""
    bodies = []
    start = text.find(opening)
    while start != -1:
        begin = start + len(opening)
        end = text.find(closing, begin)
        if end == -1:
            break  # no closing tag after this one: none after the later openings either
        bodies.append(text[begin:end])
        start = text.find(opening, end + len(closing))
    return bodies


def _json_values(text: str):
    """Yield the JSON values that start where an object with a key, or an array of objects, starts in text: the
    first JSON_ATTEMPTS such places."""
    for attempt, match in enumerate(_JSON_START.finditer(text)):
        if attempt == JSON_ATTEMPTS:
            return
        try:
            value, _ = _DECODER.raw_decode(text, match.start())
        except (ValueError, RecursionError):
            continue
        yield value


def _function_tag(body: str) -> ToolCall | None:
    """The call in the body of <function=NAME>{arguments}</function>."""
    name = _FUNCTION_NAME.match(body)
    if name is None:
        return None
    raw = body[name.end():].strip()
    arguments = _loads(raw) if raw else {}
    return {"name": name.group()[:-1], "arguments": arguments} if isinstance(arguments, dict) else None


def _pythonic(text: str) -> ToolCall | None:
    """name(key=value, ...), optionally in brackets, ending the text."""
    text = text.strip()
    if text.endswith("]"):
        text = text[:-1].rstrip()
    match = _CALL_NAME.search(text)
    if not text.endswith(")") or match is None:
        return None
    name, inside = match.group(1), text[match.end():-1]
    try:
        call = parse(f"{name}({inside})", mode="eval").body  # type: ignore[attr-defined]
        if not isinstance(call, ast.Call) or call.args:
            return None
        arguments = {kw.arg: ast.literal_eval(kw.value) for kw in call.keywords if kw.arg}
    except (ValueError, SyntaxError, RecursionError, MemoryError):
        return None
    return {"name": name, "arguments": arguments}


def find_tool_call(action: object, tool_names: Collection[str]) -> ToolCall | str:
    """The tool call an action makes (a call object or model text), or a message saying why there is none."""
    if isinstance(action, str):
        call = parse_tool_call(action)
        if call is None:
            return f"no tool call found in the text; call one of: {', '.join(tool_names)}"
    else:
        call = normalize_tool_call(action)
        if call is None:
            return f'a tool call is an object {{"name": <tool>, "arguments": {{...}}}}; tools: {", ".join(tool_names)}'
    if call["name"] not in tool_names:
        return f"unknown tool {call['name']!r}; call one of: {', '.join(tool_names)}"
    return call


def _tool_call_tag(body: str) -> ToolCall | None:
    return normalize_tool_call(_loads(body))


_TAGS = (("<tool_call>", "</tool_call>", _tool_call_tag), ("<function=", "</function>", _function_tag))


def parse_tool_calls(text: str) -> list[ToolCall]:
    """Every tool call written in text, in order, in the first format that has any: <tool_call> tags,
    <function=...> tags, the first JSON value holding calls (a list of calls is several), a pythonic call."""
    for opening, closing, read in _TAGS:
        calls = [call for body in _tagged(text, opening, closing) if (call := read(body))]
        if calls:
            return calls
    return _untagged_calls(text)


def parse_tool_call(text: str) -> ToolCall | None:
    """The first tool call found in text (parse_tool_calls(text)[0]), or None. Tags are read only up to the
    first call: this runs on every step of a tool env."""
    for opening, closing, read in _TAGS:
        for body in _tagged(text, opening, closing):
            call = read(body)
            if call:
                return call
    calls = _untagged_calls(text)
    return calls[0] if calls else None


def _untagged_calls(text: str) -> list[ToolCall]:
    """The calls of the first JSON value holding any, else a pythonic call."""
    for value in _json_values(text):
        calls = [call for call in map(normalize_tool_call, value if isinstance(value, list) else [value]) if call]
        if calls:
            return calls
    call = _pythonic(text)
    return [call] if call else []

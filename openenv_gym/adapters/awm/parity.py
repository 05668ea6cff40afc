"""AWM's own agent protocol, for checkpoints trained on it (Arctic-AWM): two meta-tools, `list_tools` and
`call_tool(tool_name, arguments as a JSON string)`, the world's tools listed with the prefix `mcp_tool_`, calls
written as `<tool_call>{"name": ..., "arguments": ...}</tool_call>`, one call executed per turn, and a turn with
no tool call as the final answer. The system prompt is our wording of AWM's protocol; to use AWM's own text,
pass it as the reset option `system_prompt`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from openenv_gym.episode.toolcalls import normalize_tool_call, parse_tool_calls

PREFIX = "mcp_tool_"
SYSTEM_PROMPT = """\
You are working in an app through its MCP tools, on behalf of a user who is logged in with user id 1.
Call one function per turn. Two functions are available:

1. list_tools: lists the app's tools and their parameters. Arguments: none. Call it first, and once.
2. call_tool: calls one of the app's tools. Arguments: tool_name (str, a name from list_tools) and arguments
   (str: the tool's arguments as a JSON object string, "{}" if it takes none).

Write each call as JSON inside <tool_call></tool_call> tags:
<tool_call>
{"name": "list_tools", "arguments": null}
</tool_call>
<tool_call>
{"name": "call_tool", "arguments": {"tool_name": "mcp_tool_get_item", "arguments": "{\\"item_id\\": 3}"}}
</tool_call>

When you are done, reply with the answer or a summary of what you did, and no function call."""


@dataclass(frozen=True)
class Parsed:
    kind: str  # "list", "call", "final" or "error"
    tool: str = ""
    arguments: dict[str, Any] | None = None
    text: str = ""  # the final answer, or the error's observation


def listing(tools: list[dict[str, Any]]) -> str:
    """What list_tools answers: the world's tools, prefixed, with their parameters."""
    lines = [f"Available MCP tools ({len(tools)}):"]
    for number, tool in enumerate(tools, 1):
        lines.append(f"{number}. {PREFIX}{tool['name']}: {tool.get('description') or 'no description'}")
        schema = tool.get("inputSchema") or {}
        required = set(schema.get("required") or ())
        for name, spec in (schema.get("properties") or {}).items():
            kind = spec.get("type", "any") if isinstance(spec, dict) else "any"
            need = "required" if name in required else "optional"
            lines.append(f"   - {name} ({kind}, {need})")
    return "\n".join(lines)


def parse(turn: str | dict) -> Parsed:
    """A model turn in AWM's protocol (its text, or a call as an object): what it asks for (only its first call
    counts, as in AWM)."""
    if isinstance(turn, dict):
        call = normalize_tool_call(turn)
        if call is None:
            return Parsed("error", text='Error: a call is {"name": "list_tools" | "call_tool", "arguments": ...}')
        calls = [call]
    else:
        calls = parse_tool_calls(turn)
    if not calls:
        return Parsed("final", text=turn)
    name, arguments = calls[0]["name"], calls[0]["arguments"]
    if name == "list_tools":
        return Parsed("list")
    if name.startswith(PREFIX):  # a world tool called by name, as AWM's parser also takes
        return Parsed("call", name.removeprefix(PREFIX), arguments)
    if name != "call_tool":
        return Parsed("error", text=f"Error: Unknown tool '{name}'. Only 'list_tools' and 'call_tool' are available.")
    tool, inner = arguments.get("tool_name"), arguments.get("arguments") or {}
    if isinstance(inner, str):
        try:
            inner = json.loads(inner) if inner.strip() else {}
        except ValueError as exc:
            return Parsed("error", text=f"Error: the arguments of {tool} are not a JSON object string ({exc})")
    if not isinstance(tool, str) or not isinstance(inner, dict):
        return Parsed("error", text="Error: call_tool needs tool_name (a string) and arguments (a JSON object string)")
    return Parsed("call", tool.removeprefix(PREFIX), inner)

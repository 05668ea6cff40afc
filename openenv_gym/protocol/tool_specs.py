"""The one shape of a tool in `info["tools"]` and an environment's description, in every kind:

    {"name": str, "description": str, "parameters": JSON Schema of the arguments (an object)}

Kinds and peers list tools in their own shapes; each is read into ours here, the one place that knows them:
OpenAI's function tool ({"type": "function", "function": {name, description, parameters}}), MCP's Tool
({name, description, inputSchema}), ORS's ToolSpec and OpenEnv's ({name, description, input_schema}) and
Verifiers' Tool ({name, description, parameters, strict}). A model server takes OpenAI's shape: `openai_tool`.
"""

from __future__ import annotations

from typing import Any

EMPTY_SCHEMA = {"type": "object", "properties": {}}


def as_tool(tool: dict[str, Any]) -> dict[str, Any]:
    """A tool of any of the shapes above as ours."""
    function = tool.get("function")
    if isinstance(function, dict):  # OpenAI's
        tool = function
    schema = tool.get("parameters") or tool.get("inputSchema") or tool.get("input_schema") or EMPTY_SCHEMA
    return {"name": tool["name"], "description": tool.get("description") or "", "parameters": schema}


def as_tools(tools: Any) -> list[dict[str, Any]]:
    """A list of tools as ours; what names no tool (a program's request may hold anything) is left out."""
    return [as_tool(tool) for tool in tools or () if isinstance(tool, dict) and isinstance(_name(tool), str)]


def _name(tool: dict[str, Any]) -> Any:
    function = tool.get("function")
    return (function if isinstance(function, dict) else tool).get("name")


def openai_tool(tool: dict[str, Any]) -> dict[str, Any]:
    """A tool of ours as OpenAI's function tool, as model servers and chat templates take them."""
    return {"type": "function", "function": {"name": tool["name"], "description": tool.get("description") or "",
                                             "parameters": tool.get("parameters") or EMPTY_SCHEMA}}

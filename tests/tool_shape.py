"""info["tools"] has one shape in every kind (openenv_gym/protocol/tool_specs.py): each kind's tests read its
tools through `names_of`, which holds every tool to that shape."""

from typing import Any


def names_of(tools: list[dict[str, Any]]) -> list[str]:
    for tool in tools:
        assert set(tool) == {"name", "description", "parameters"}, f"not a tool of the one shape: {tool}"
        assert isinstance(tool["name"], str) and isinstance(tool["description"], str), tool
        assert tool["parameters"].get("type") == "object", f"parameters are not an object's schema: {tool}"
    return [tool["name"] for tool in tools]

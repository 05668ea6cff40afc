"""Python methods made from an env's tool schemas, as TRL wants tools: typed arguments and a Google-style
docstring with an `Args:` section, so that transformers' `get_json_schema` reads the same schema back.

No source is generated: each method is one closure with a `__signature__`, `__annotations__` and `__doc__`
written from the JSON schema.
"""

from __future__ import annotations

import inspect
import keyword
import re
from collections.abc import Callable
from typing import Any, Literal, Union

RESERVED = frozenset({"reset", "get_reward"})  # TRL's own names on an environment class
_JSON_TYPES: dict[str, Any] = {"integer": int, "number": float, "string": str, "boolean": bool, "object": dict,
                               "null": type(None)}
_ARGS_SECTION = re.compile(r"\n\s*(Args|Arguments|Parameters):.*", re.DOTALL)


def python_type(schema: dict[str, Any]) -> Any:
    """The type hint get_json_schema turns back into (about) this JSON schema."""
    if schema.get("enum"):
        return Literal[tuple(schema["enum"])]
    options = schema.get("anyOf") or schema.get("oneOf")
    if options:
        return Union[tuple(python_type(option) for option in options)]  # noqa: UP007 (built from a list)
    kind = schema.get("type", "string")
    if isinstance(kind, list):
        return Union[tuple(python_type({**schema, "type": k}) for k in kind)]  # noqa: UP007
    if kind == "array":
        return list[python_type(schema.get("items") or {})]
    return _JSON_TYPES.get(kind, str)


def python_name(name: str, taken: set[str]) -> str:
    """A public identifier for a tool or argument name, unique among `taken`."""
    cleaned = re.sub(r"\W", "_", name).lstrip("_") or "tool"
    if cleaned[0].isdigit() or keyword.iskeyword(cleaned) or cleaned in RESERVED:
        cleaned = f"{cleaned}_"
    while cleaned in taken:
        cleaned = f"{cleaned}_"
    taken.add(cleaned)
    return cleaned


def _one_line(text: str) -> str:
    return " ".join(text.split())


def docstring(description: str, arguments: list[tuple[str, str]]) -> str:
    """A Google-style docstring: the tool's description (without an Args section of its own), then Args."""
    summary = _ARGS_SECTION.sub("", description or "").strip() or "Call this tool of the environment."
    lines = [summary, ""]
    if arguments:
        lines.append("Args:")
        lines += [f"    {name}: {_one_line(text)}" for name, text in arguments]
    return "\n".join(lines)


def tool_method(spec: dict[str, Any], call: Callable[[Any, str, dict[str, Any]], str],
                taken: set[str]) -> tuple[str, Callable[..., str]]:
    """(method name, method) for one tool spec {"name", "description", "parameters"}. The method sends
    `call(self, tool name, arguments)` with the arguments under their schema names."""
    schema = spec.get("parameters") or {}
    required = set(schema.get("required", ()))
    parameters = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    annotations: dict[str, Any] = {"return": str}
    schema_name_of: dict[str, str] = {}
    documented: list[tuple[str, str]] = []
    argument_names: set[str] = {"self"}
    for schema_name, prop in (schema.get("properties") or {}).items():
        name = python_name(schema_name, argument_names)
        hint = python_type(prop)
        default = inspect.Parameter.empty if schema_name in required else None
        if default is None:
            hint = hint | None
        parameters.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=hint))
        annotations[name] = hint
        schema_name_of[name] = schema_name
        documented.append((name, prop.get("description") or f"the {schema_name} argument"))
    tool_name = spec["name"]

    def method(self: Any, **kwargs: Any) -> str:
        arguments = {schema_name_of.get(k, k): v for k, v in kwargs.items()
                     if v is not None or schema_name_of.get(k, k) in required}
        return call(self, tool_name, arguments)

    method.__name__ = method.__qualname__ = python_name(tool_name, taken)
    method.__doc__ = docstring(spec.get("description", ""), documented)
    method.__signature__ = inspect.Signature(parameters, return_annotation=str)  # type: ignore[attr-defined]
    method.__annotations__ = annotations
    return method.__name__, method

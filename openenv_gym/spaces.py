"""Spaces for text environments.

Gymnasium's `Text` space rejects any character outside its charset, non-ASCII included, so model
text would fall outside it. `UnicodeText` contains every string within its length bounds and uses
its charset only to sample. `ToolCallSpace` holds model text or tool calls `{"name", "arguments"}`;
its samples call the environment's tools with arguments drawn from their JSON schemas.
"""

from __future__ import annotations

import string
from typing import Any

import numpy as np
from gymnasium.spaces import Space

SAMPLE_CHARSET = string.ascii_letters + string.digits + string.punctuation + " \n" + "éßñü你好🙂"
SAMPLE_MAX_LENGTH = 64
DEFAULT_MAX_LENGTH = 1 << 24


def _random_text(rng: np.random.Generator, min_length: int, max_length: int, charset: str) -> str:
    length = int(rng.integers(min_length, max(min_length, min(max_length, SAMPLE_MAX_LENGTH)) + 1))
    return "".join(charset[i] for i in rng.integers(0, len(charset), size=length))


class _UnflattenedSpace(Space[Any]):
    """What both spaces share: their members are not numpy arrays, and spaces are equal by `_identity()`."""

    def _identity(self) -> tuple:
        raise NotImplementedError

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other._identity() == self._identity()  # type: ignore[attr-defined]


class UnicodeText(_UnflattenedSpace):
    """Any Unicode string of min_length..max_length characters."""

    def __init__(self, max_length: int = DEFAULT_MAX_LENGTH, *, min_length: int = 0,
                 charset: str = SAMPLE_CHARSET, seed: int | np.random.Generator | None = None) -> None:
        if not 0 <= min_length <= max_length:
            raise ValueError(f"need 0 <= min_length <= max_length, got {min_length} and {max_length}")
        self.min_length = min_length
        self.max_length = max_length
        self.charset = charset
        super().__init__(dtype=str, seed=seed)

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        return _random_text(self.np_random, self.min_length, self.max_length, self.charset)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def _identity(self) -> tuple:
        return self.min_length, self.max_length

    def __repr__(self) -> str:
        return f"UnicodeText({self.min_length}, {self.max_length})"


def sample_from_schema(schema: dict[str, Any], rng: np.random.Generator) -> Any:
    """A random value of (roughly) the JSON-schema type; bounds and enums are respected."""
    if "enum" in schema:
        return schema["enum"][int(rng.integers(len(schema["enum"])))]
    if "anyOf" in schema:
        return sample_from_schema(schema["anyOf"][int(rng.integers(len(schema["anyOf"])))], rng)
    kind = schema.get("type", "string")
    if kind == "integer":
        return int(rng.integers(schema.get("minimum", -10), schema.get("maximum", 100) + 1))
    if kind == "number":
        return float(rng.uniform(schema.get("minimum", -10.0), schema.get("maximum", 100.0)))
    if kind == "boolean":
        return bool(rng.integers(2))
    if kind == "array":
        return [sample_from_schema(schema.get("items", {}), rng) for _ in range(int(rng.integers(4)))]
    if kind == "object":
        return sample_arguments(schema, rng)
    if kind == "null":
        return None
    return _random_text(rng, 0, 16, string.ascii_lowercase)


def sample_arguments(schema: dict[str, Any], rng: np.random.Generator) -> dict[str, Any]:
    required = set(schema.get("required", ()))
    return {name: sample_from_schema(prop, rng) for name, prop in schema.get("properties", {}).items()
            if name in required or rng.random() < 0.5}


class ToolCallSpace(_UnflattenedSpace):
    """Model text, or a tool call `{"name": str, "arguments": dict}` for one of `tools`."""

    def __init__(self, tools: list[dict[str, Any]], max_length: int = DEFAULT_MAX_LENGTH,
                 seed: int | np.random.Generator | None = None) -> None:
        self.tools = tools
        self.max_length = max_length
        super().__init__(dtype=object, seed=seed)

    @property
    def tool_names(self) -> list[str]:
        return [t["name"] for t in self.tools]

    def sample(self, mask: Any = None, probability: Any = None) -> Any:
        rng = self.np_random
        if not self.tools or rng.random() < 0.2:  # sometimes text, which may hold no tool call
            return _random_text(rng, 0, self.max_length, SAMPLE_CHARSET)
        chosen = self.tools[int(rng.integers(len(self.tools)))]
        return {"name": chosen["name"], "arguments": sample_arguments(chosen.get("parameters", {}), rng)}

    def contains(self, x: Any) -> bool:
        if isinstance(x, str):
            return len(x) <= self.max_length
        return (isinstance(x, dict) and isinstance(x.get("name"), str)
                and isinstance(x.get("arguments", {}), dict))

    def _identity(self) -> tuple:
        return (self.tools,)

    def __repr__(self) -> str:
        return f"ToolCallSpace({self.tool_names})"


def spaces_for(description: dict[str, Any]) -> tuple[Space, Space]:
    """(observation_space, action_space) for a server's environment description."""
    observation_space = UnicodeText()
    if description.get("action") == "tools":
        return observation_space, ToolCallSpace(description.get("tools", []))
    return observation_space, UnicodeText()

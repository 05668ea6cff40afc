"""Unicode text and tool-call spaces."""

from typing import Literal

import numpy as np
from gymnasium.vector.utils import batch_space

from openenv_gym.adapters.tools import Tool
from openenv_gym.spaces import ToolCallSpace, UnicodeText, sample_arguments, spaces_for

TOOLS = [
    {"name": "guess", "parameters": {"type": "object", "properties": {
        "number": {"type": "integer", "minimum": 1, "maximum": 9}}, "required": ["number"]}},
    {"name": "say", "parameters": {"type": "object", "properties": {
        "mood": {"enum": ["happy", "sad"]}, "loud": {"type": "boolean"}}, "required": ["mood"]}},
]


def test_unicode_text_contains_any_unicode_within_bounds():
    space = UnicodeText(10, min_length=1)
    assert "héllo 🙂" in space
    assert "" not in space and "x" * 11 not in space and 5 not in space


def test_unicode_text_samples_are_members_and_seeded():
    a, b = UnicodeText(50, seed=3), UnicodeText(50, seed=3)
    samples = [a.sample() for _ in range(20)]
    assert samples == [b.sample() for _ in range(20)]
    assert all(s in a for s in samples)


def test_tool_call_space_samples_follow_schemas():
    space = ToolCallSpace(TOOLS, seed=0)
    samples = [space.sample() for _ in range(300)]
    calls = [s for s in samples if isinstance(s, dict)]
    assert all(s in space for s in samples)
    assert 150 < len(calls) < 300 and any(isinstance(s, str) for s in samples)
    numbers = [c["arguments"]["number"] for c in calls if c["name"] == "guess"]
    moods = [c["arguments"] for c in calls if c["name"] == "say"]
    assert set(numbers) == set(range(1, 10))  # the whole range, bounds included, and nothing outside it
    assert {m["mood"] for m in moods} == {"happy", "sad"}
    assert any("loud" in m for m in moods) and any("loud" not in m for m in moods)  # optional: sometimes sent
    assert all(isinstance(m["loud"], bool) for m in moods if "loud" in m)


def test_tool_call_space_membership():
    space = ToolCallSpace(TOOLS)
    assert {"name": "guess", "arguments": {"number": 3}} in space
    assert "raw text" in space
    assert {"arguments": {}} not in space and 3 not in space


def test_schema_from_a_tool_method_drives_sampling():
    """Samples drawn from a tool's schema pass that tool's own argument check (the one steps go through)."""

    def pick(self, count: int, label: str = "x", ratio: float = 0.5, tags: list[str] | None = None,
             mode: Literal["fast", "slow"] = "fast") -> str:
        """Pick things."""
        return ""

    tool = Tool.from_method(pick)
    spec = tool.spec()
    assert spec["description"] == "Pick things." and spec["parameters"]["required"] == ["count"]
    rng = np.random.default_rng(0)
    samples = [sample_arguments(spec["parameters"], rng) for _ in range(200)]
    for args in samples:
        tool.arguments.model_validate(args)  # raises if a sample breaks the schema
    assert all(type(args["count"]) is int for args in samples)
    for optional in ("label", "ratio", "tags", "mode"):
        assert 20 < sum(optional in args for args in samples) < 180  # sometimes sent, sometimes not
    assert {args["mode"] for args in samples if "mode" in args} == {"fast", "slow"}


def test_spaces_for_descriptions_and_batching():
    obs, act = spaces_for({"action": "tools", "tools": TOOLS})
    assert isinstance(obs, UnicodeText) and isinstance(act, ToolCallSpace)
    assert isinstance(spaces_for({"action": "text"})[1], UnicodeText)
    batched = batch_space(obs, 3)
    assert len(batched.sample()) == 3

"""Unicode text and tool-call spaces."""

from gymnasium.vector.utils import batch_space

from openenv_gym.spaces import ToolCallSpace, UnicodeText, sample_arguments, spaces_for
from openenv_gym.tools import Tool

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
    for call in calls:
        if call["name"] == "guess":
            assert 1 <= call["arguments"]["number"] <= 9
        else:
            assert call["arguments"]["mood"] in ("happy", "sad")


def test_tool_call_space_membership():
    space = ToolCallSpace(TOOLS)
    assert {"name": "guess", "arguments": {"number": 3}} in space
    assert "raw text" in space
    assert {"arguments": {}} not in space and 3 not in space


def test_schema_from_a_tool_method_drives_sampling():
    def pick(self, count: int, label: str = "x") -> str:
        """Pick things."""
        return ""

    spec = Tool.from_method(pick).spec()
    assert spec["description"] == "Pick things."
    assert spec["parameters"]["required"] == ["count"]
    import numpy as np
    args = sample_arguments(spec["parameters"], np.random.default_rng(0))
    assert isinstance(args["count"], int)


def test_spaces_for_descriptions_and_batching():
    obs, act = spaces_for({"action": "tools", "tools": TOOLS})
    assert isinstance(obs, UnicodeText) and isinstance(act, ToolCallSpace)
    assert isinstance(spaces_for({"action": "text"})[1], UnicodeText)
    batched = batch_space(obs, 3)
    assert len(batched.sample()) == 3

"""Tool calls are found in the formats models write them in."""

import pytest

from openenv_gym.episode.toolcalls import normalize_tool_call, parse_tool_call

CALL = {"name": "guess", "arguments": {"number": 42}}


@pytest.mark.parametrize("text", [
    '<tool_call>{"name": "guess", "arguments": {"number": 42}}</tool_call>',
    'Let me think.\n<tool_call>\n{"name": "guess", "arguments": {"number": 42}}\n</tool_call>',
    '{"name": "guess", "parameters": {"number": 42}}',
    'I will call {"name": "guess", "arguments": {"number": 42}} now',
    '{"type": "function", "function": {"name": "guess", "arguments": "{\\"number\\": 42}"}}',
    '<function=guess>{"number": 42}</function>',
    "guess(number=42)",
    "[guess(number=42)]",
    '[TOOL_CALLS] [{"name": "guess", "arguments": {"number": 42}}]',
    'text with a brace { first, then {"name": "guess", "arguments": {"number": 42}}',
])
def test_formats(text):
    assert parse_tool_call(text) == CALL


@pytest.mark.parametrize("text", [
    "", "just words", "{broken json", '{"no_name": 1}', "guess(42)", "print(open('x'))(",
    '{"name": "guess", "arguments": "not json"}', "[1, 2, 3]",
])
def test_no_call(text):
    assert parse_tool_call(text) is None


def test_normalize_defaults_missing_arguments():
    assert normalize_tool_call({"name": "give_up"}) == {"name": "give_up", "arguments": {}}
    assert normalize_tool_call({"name": "x", "arguments": [1]}) is None
    assert normalize_tool_call({"name": ""}) is None

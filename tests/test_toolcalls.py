"""Tool calls are found in the formats models write them in."""

import pytest

from openenv_gym.episode.toolcalls import normalize_tool_call, parse_tool_call

CALL = {"name": "guess", "arguments": {"number": 42}}


FORMATS = [
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
]


@pytest.mark.parametrize("text", FORMATS)
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


# Inputs that made the parser quadratic (a 40,000-character action froze a worker for 12 s) or blew its
# recursion limit. Each must give "no call" promptly: the timeout is a hang guard, not a speed figure.
ADVERSARIAL = {
    "one long word": "x" * 400_000,
    "words before an open paren": "call " * 80_000 + "(",
    "nested brackets": "[" * 200_000,
    "nested braces": '{"a":' * 100_000,
    "unclosed tool tags": "<tool_call>{" * 40_000,
    "unclosed function tags": "<function=f>" * 40_000,
    "deep pythonic call": "f(x=" + "[" * 100_000 + "])",
}


@pytest.mark.timeout(30)
@pytest.mark.parametrize("name", sorted(ADVERSARIAL))
def test_adversarial_text_is_no_call_promptly(name):
    assert parse_tool_call(ADVERSARIAL[name]) is None


def test_a_call_after_many_brackets_is_still_found():
    assert parse_tool_call("[" * 1000 + ' {"name": "guess", "arguments": {"number": 42}}') == CALL
    assert parse_tool_call("<tool_call>" * 3 + '{"name": "guess", "arguments": {"number": 42}}</tool_call>') == CALL


def test_every_call_of_a_message_is_found_in_order():
    from openenv_gym.episode.assistant import assistant_message
    from openenv_gym.episode.toolcalls import parse_tool_calls

    two = ('<tool_call>{"name": "a", "arguments": {"x": 1}}</tool_call> then '
           '<tool_call>{"name": "b", "arguments": {}}</tool_call>')
    assert parse_tool_calls(two) == [{"name": "a", "arguments": {"x": 1}}, {"name": "b", "arguments": {}}]
    mistral = '[TOOL_CALLS] [{"name": "a", "arguments": {"x": 1}}, {"name": "b", "arguments": {}}]'
    assert [c["name"] for c in parse_tool_calls(mistral)] == ["a", "b"]
    assert parse_tool_calls("no call") == [] and parse_tool_calls("guess(number=42)") == [CALL]
    assert parse_tool_call(two) == {"name": "a", "arguments": {"x": 1}}  # the first, for one-call envs
    message = assistant_message(two, {"a", "b"}, turn=3)  # the Verifiers adapter plays them all, as verifiers does
    assert [(c["id"], c["name"]) for c in message["tool_calls"]] == [("call_3_0", "a"), ("call_3_1", "b")]


@pytest.mark.parametrize("text", [
    *FORMATS,
    '<tool_call>not json</tool_call><tool_call>{"name": "guess", "arguments": {"number": 42}}</tool_call>',
    '<tool_call>{"name": ""}</tool_call><function=guess>{"number": 42}</function>',
    '<tool_call>{"function": {"name": "guess", "arguments": "{\\"number\\": 42}"}}</tool_call>',
    '<tool_call>{"name": "guess", "function": 3, "parameters": {"number": 42}}</tool_call>',
    "<tool_call>[]</tool_call> guess(number=42)", "no call",
])
def test_the_first_call_is_the_first_of_all_calls(text):
    """parse_tool_call stops at the first call it reads; it must agree with parse_tool_calls in every style."""
    from openenv_gym.episode.toolcalls import parse_tool_calls

    calls = parse_tool_calls(text)
    assert parse_tool_call(text) == (calls[0] if calls else None)
    assert calls or text == "no call"

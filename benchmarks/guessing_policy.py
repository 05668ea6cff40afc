"""Scripted bisection policies, instant and stateless: for the Verifiers benchmark's guessing game (vf_guessing),
so openenv_gym's side and verifiers' in-process side play exactly the same games, and for the shipped `guess` env
(its hints "higher/lower than N", its tool call)."""

from __future__ import annotations

import re

RANGE = re.compile(r"between (\d+) and (\d+)")
HINT = re.compile(r"(higher|lower) than (\d+)")


def bisect_guess(text: str) -> str:
    """Guess the middle of the range the text names last (the whole range when it names none)."""
    low, high = map(int, (RANGE.findall(text) or [(1, 100)])[-1])
    return f"<guess>{(low + high) // 2}</guess>"


def guess_call(texts: list[str]) -> str:
    """For `guess`: the middle of what the hints in `texts` leave open, as a Hermes tool call."""
    low, high = 1, 100
    for text in texts:
        for direction, number in HINT.findall(text):
            if direction == "higher":
                low = max(low, int(number) + 1)
            else:
                high = min(high, int(number) - 1)
    return f'<tool_call>{{"name": "guess", "arguments": {{"number": {(low + high) // 2}}}}}</tool_call>'


async def bisect_policy(messages: list[dict], tools: list[dict]) -> str:
    """guess_call as a rollouts() policy: the hints are in the conversation so far."""
    return guess_call([message.get("content") or "" for message in messages])

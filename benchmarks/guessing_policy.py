"""The scripted policy of the Verifiers benchmark's guessing game (vf_guessing): instant and stateless,
so openenv_gym's side and verifiers' in-process side play exactly the same games."""

from __future__ import annotations

import re

RANGE = re.compile(r"between (\d+) and (\d+)")


def bisect_guess(text: str) -> str:
    """Guess the middle of the range the text names last (the whole range when it names none)."""
    low, high = map(int, (RANGE.findall(text) or [(1, 100)])[-1])
    return f"<guess>{(low + high) // 2}</guess>"

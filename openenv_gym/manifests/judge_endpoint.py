"""The LLM judge a user gives the server: an OpenAI-compatible chat completions endpoint named in the server's
environment (OPENENV_GYM_JUDGE_URL, OPENENV_GYM_JUDGE_MODEL, and OPENENV_GYM_JUDGE_KEY if it needs one). AWM's SQL
mode asks it for verdicts; NeMo Gym's resource servers call it as their model servers (a judge, a user simulator).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

JUDGE_URL, JUDGE_MODEL, JUDGE_KEY = "OPENENV_GYM_JUDGE_URL", "OPENENV_GYM_JUDGE_MODEL", "OPENENV_GYM_JUDGE_KEY"
HOW_TO_GIVE = (f"set {JUDGE_URL}=http://host:port/v1 and {JUDGE_MODEL}=<model> (an OpenAI-compatible endpoint; "
               f"{JUDGE_KEY} if it needs a key) in the server's environment")


@dataclass(frozen=True)
class JudgeEndpoint:
    base_url: str  # ends before /chat/completions: http://host:port/v1
    model: str
    api_key: str | None = None

    @classmethod
    def from_environment(cls) -> JudgeEndpoint | None:
        url, model = os.environ.get(JUDGE_URL), os.environ.get(JUDGE_MODEL)
        return cls(url.rstrip("/"), model, os.environ.get(JUDGE_KEY)) if url and model else None

"""AWM's SQL mode: a verifier's facts about the databases, judged by an LLM behind an OpenAI-compatible endpoint
that the user gives (judge_endpoint.py). The judge answers with one JSON object whose `classification` is complete,
incomplete, server_error or agent_error; only complete counts as done.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from openenv_gym.manifests.judge_endpoint import JudgeEndpoint

CLASSES = ("complete", "incomplete", "server_error", "agent_error")
INSTRUCTIONS = (
    "You decide whether an agent completed a task in an app backed by a database. You are given the task, the "
    "agent's tool calls with their results, its final answer, and facts about the database before and after the "
    "episode, computed by a checking script. Judge from the facts first. Reply with one JSON object only: "
    '{"classification": "complete" | "incomplete" | "server_error" | "agent_error", "confidence": <0 to 1>, '
    '"evidence": "<one or two sentences>"}. Say complete only when the facts show the task done.')
MAX_TOKENS = 4096


class Judge(JudgeEndpoint):
    async def classify(self, task: str, trajectory: list[dict[str, Any]], answer: str, facts: Any,
                       timeout: float) -> tuple[str | None, dict | None]:
        """(classification, None), or (None, the typed error)."""
        content = json.dumps({"task": task, "trajectory": trajectory, "final_answer": answer, "facts": facts},
                             default=str)
        body = {"model": self.model, "temperature": 1.0, "max_tokens": MAX_TOKENS,
                "messages": [{"role": "system", "content": INSTRUCTIONS}, {"role": "user", "content": content}]}
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        try:
            async with httpx.AsyncClient(timeout=timeout) as http:
                response = await http.post(f"{self.base_url}/chat/completions", json=body, headers=headers)
            response.raise_for_status()
            text = response.json()["choices"][0]["message"]["content"] or ""
            verdict, _ = json.JSONDecoder().raw_decode(text[text.index("{"):])
            classification = verdict["classification"]
        except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as exc:
            return None, {"code": "judge_error", "message": f"the judge at {self.base_url} gave no verdict: "
                                                            f"{type(exc).__name__}: {str(exc)[:300]}"}
        if classification not in CLASSES:
            return None, {"code": "judge_error", "message": f"the judge answered {classification!r}, not one of "
                                                            f"{', '.join(CLASSES)}"}
        return classification, None

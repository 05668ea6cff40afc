"""Rewards an agent environment may name in its manifest (`reward = "openenv_gym.adapters.agent.rewards:NAME"`)
rather than write its own: functions of the episode's trace (the task with its answer, each turn's messages)."""

from __future__ import annotations

from typing import Any


def answer_in_last_tool_output(trace: dict[str, Any]) -> float:
    """1.0 when the program ended well and the output of the last tool call it ran holds the task's answer: a CLI
    agent told to check its work (`cat out.txt`) shows what it made."""
    outputs = [message.get("content") or "" for turn in trace["turns"] for message in turn["messages"]
               if message.get("role") == "tool"]
    return float(trace.get("exit_code") == 0 and bool(outputs) and str(trace["task"]["answer"]) in outputs[-1])

"""The built-in agent program of a Harbor trial (harness "bash"): a terminus-style loop that runs inside the trial's
sandbox, forked warm. It asks the model (the session's endpoint: each request is a step of the episode), runs the
bash commands the model calls in the task's workdir, answers with their output and exit code, and stops at submit
or after `max_turns`. Standard library only: it is imported in the programs' fork server."""

from __future__ import annotations

import http.client
import json
import subprocess
import urllib.parse
from typing import Any

SYSTEM = ("You are working in a Linux shell to complete a task. Run commands with the bash tool; each returns the "
          "command's output and exit code. When the task is done, call submit.")
TOOLS = [{"type": "function", "function": {
             "name": "bash", "description": "Run a bash command in the task's working directory.",
             "parameters": {"type": "object", "properties": {"command": {"type": "string"}},
                            "required": ["command"]}}},
         {"type": "function", "function": {"name": "submit", "description": "Say the task is done.",
                                           "parameters": {"type": "object", "properties": {}}}}]
OUTPUT_CHARS = 16_384


def run(prompt: str, base_url: str, api_key: str, model: str, workdir: str, max_turns: int = 50,
        command_timeout: float = 120.0) -> dict[str, Any]:
    address = urllib.parse.urlsplit(base_url)
    connection = http.client.HTTPConnection(address.hostname, address.port, timeout=3600)
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}]
    for turn in range(1, max_turns + 1):
        connection.request("POST", address.path + "/chat/completions",
                           json.dumps({"model": model, "messages": messages, "tools": TOOLS}),
                           {"Content-Type": "application/json", "Authorization": f"Bearer {api_key}"})
        message = json.loads(connection.getresponse().read())["choices"][0]["message"]
        messages.append(message)
        calls = message.get("tool_calls") or []
        if not calls:
            messages.append({"role": "user", "content": "Run a command with the bash tool, or call submit."})
        for call in calls:
            if call["function"]["name"] == "submit":
                return {"submitted": True, "turns": turn}
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": _bash(call, workdir,
                                                                                          command_timeout)})
    return {"submitted": False, "turns": max_turns}


def _bash(call: dict[str, Any], workdir: str, timeout: float) -> str:
    try:
        command = json.loads(call["function"].get("arguments") or "{}")["command"]
    except (ValueError, KeyError, TypeError):
        return 'bash takes {"command": "..."}'
    try:
        done = subprocess.run(["bash", "-c", command], cwd=workdir, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"[killed after {timeout:g} s]"
    output = (done.stdout + done.stderr).decode("utf-8", "replace")[-OUTPUT_CHARS:]
    return f"{output}[exit code {done.returncode}]"

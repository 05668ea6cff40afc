"""An agent environment's tasks: JSON-lines files, one per split, read once per worker.

A task is a JSON object. The program sees it without its hidden keys (the answer); the reward function sees it
whole. Its "prompt" (else the visible task as JSON) is the text a command gets on its argv or stdin.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson

from openenv_gym.manifests.schema import AgentManifest, ManifestError

HIDDEN_KEYS = ("answer",)


class TaskFiles:
    def __init__(self, manifest: AgentManifest) -> None:
        files = {"train": manifest.tasks} if isinstance(manifest.tasks, str) else dict(manifest.tasks)
        self.tasks = {split: _read(manifest.folder / path, manifest) for split, path in files.items()}

    async def splits(self) -> list[dict[str, str]]:
        return [{"name": split, "type": "test" if split in ("test", "eval") else "train"} for split in self.tasks]

    async def num_tasks(self, split: str) -> int:
        return len(self.tasks[split])

    def task(self, split: str, index: int) -> dict[str, Any]:
        return self.tasks[split][index]


def visible(task: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in task.items() if key not in HIDDEN_KEYS}


def prompt_of(task: dict[str, Any]) -> str:
    prompt = task.get("prompt")
    return prompt if isinstance(prompt, str) else json.dumps(visible(task))


def _read(path: Path, manifest: AgentManifest) -> list[dict[str, Any]]:
    try:
        lines = path.read_bytes().splitlines()
    except OSError as exc:
        raise ManifestError(f"{manifest.folder}: cannot read the tasks file {path.name} ({exc.strerror})") from None
    tasks = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            task = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise ManifestError(f"{path}, line {number}: not JSON ({exc})") from None
        if not isinstance(task, dict):
            raise ManifestError(f"{path}, line {number}: a task is a JSON object, such as {{\"prompt\": \"...\"}}")
        tasks.append(task)
    return tasks

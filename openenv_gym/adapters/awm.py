"""Serve Agent World Model's tool worlds (manifest kind "awm") in process: thousands of sessions per worker,
no process per session.

reset:  the task (options scenario + task_idx, or split + index over every scenario's tasks, or a seeded
        choice); the episode's database is a copy of the scenario's template, with a snapshot of it for the
        verifier. Observation: the task's text; info["tools"]: the world's tools as MCP Tool objects.
step:   a tool call (an object or model text) runs the endpoint (awm_worlds.py); its answer is the observation.
        `submit(final_answer)` ends the episode: the code-mode verifier (awm_verify.py, in a child process)
        says complete or not, and the reward is the manifest's `complete` or `incomplete` value. An action with
        no usable tool call is answered with the `format_error` reward; the episode goes on.
close:  the episode's files are removed (also when a failure or the reaper ends the session).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
import tempfile
from pathlib import Path
from typing import Any

from openenv_gym.adapters.awm_verify import verify
from openenv_gym.adapters.awm_worlds import Tool, World, Worlds, call_tool, episode_engine
from openenv_gym.adapters.environment import Environment
from openenv_gym.adapters.long_text import read_action
from openenv_gym.episode.results import ResetResult, StepResult, invalid_action
from openenv_gym.episode.tasks import reveals_hidden
from openenv_gym.episode.toolcalls import find_tool_call
from openenv_gym.errors import BadRequestError
from openenv_gym.manifests.schema import AwmManifest

SPLIT = "train"  # every scenario's tasks, in index order: one catalog over all of them
SUBMIT = {"name": "submit", "description": "Give your final answer and end the task (for a question, the answer; "
          "for a change, a short summary of what you did).",
          "inputSchema": {"type": "object", "properties": {"final_answer": {"type": "string"}},
                          "required": ["final_answer"]}}


class AwmFactory:
    def __init__(self, manifest: AwmManifest) -> None:
        self.manifest = manifest
        self.root = manifest.vendored
        self.index: list[dict[str, Any]] = json.loads((self.root / "index.json").read_text())
        self.catalog_entries = [(world["name"], task) for world in self.index for task in world["tasks"]]
        self.by_name = {world["name"]: world for world in self.index}
        # this worker's episode files; a folder per process, so a crashed worker's files are found and removed
        self.scratch = Path(tempfile.mkdtemp(prefix=f"openenv-gym-awm-{os.getpid()}-"))
        self.worlds = Worlds(self.root, self.scratch, manifest.max_loaded)

    def __call__(self) -> AwmSession:
        return AwmSession(self)

    def describe(self) -> dict[str, Any]:
        return {"name": self.manifest.name, "description": self.manifest.description, "action": "tools",
                "tools": [], "max_steps": self.manifest.max_steps, "source": "awm",
                "scenarios": [world["name"] for world in self.index]}

    # -- catalog ---------------------------------------------------------------------------------

    async def catalog(self) -> list[dict[str, Any]]:
        return [{"name": SPLIT, "type": "train", "num_tasks": len(self.catalog_entries)}]

    async def tasks(self, split: str, window: range, reveal: bool) -> list[dict]:
        return [{"index": i, "scenario": self.catalog_entries[i][0], "task_idx": self.catalog_entries[i][1]["index"],
                 "task": self.catalog_entries[i][1]["task"]} for i in window if i < len(self.catalog_entries)]

    def pick(self, seed: int | None, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """(scenario, task entry) of a reset."""
        if "scenario" in options:
            world = self.by_name.get(options["scenario"])
            if world is None:
                raise BadRequestError(f"unknown scenario {options['scenario']!r}; scenarios: "
                                      f"{', '.join(list(self.by_name)[:20])}")
            tasks = {task["index"]: task for task in world["tasks"]}
            task_idx = options.get("task_idx", 0)
            if task_idx not in tasks:
                raise BadRequestError(f"scenario {world['name']} has no task {task_idx!r} with a verifier; its tasks: "
                                      f"{sorted(tasks)}")
            return world["name"], tasks[task_idx]
        if options.get("split", SPLIT) != SPLIT:
            raise BadRequestError(f"unknown split {options['split']!r}; splits: {SPLIT}")
        index = options.get("index")
        if index is None:
            index = random.Random(seed).randrange(len(self.catalog_entries))
        if type(index) is not int or not 0 <= index < len(self.catalog_entries):
            raise BadRequestError(f"index {index!r} is out of range ({len(self.catalog_entries)} tasks)")
        return self.catalog_entries[index]


class AwmSession(Environment):
    def __init__(self, factory: AwmFactory) -> None:
        self.factory = factory
        self.folder: Path | None = None  # the episode's files: db.sqlite and initial.sqlite
        self.engine: Any = None
        self.world: World | None = None
        self.task: dict[str, Any] = {}
        self.scenario = ""

    async def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> ResetResult:
        options = options or {}
        scenario, task = self.factory.pick(seed, options)
        await self._end_episode()
        self.world = await self.factory.worlds.get(scenario)
        self.folder = Path(await asyncio.to_thread(tempfile.mkdtemp, dir=self.factory.scratch))
        template = self.factory.root / scenario / "template.db"
        await asyncio.to_thread(_copy_pair, template, self.folder)
        self.engine = episode_engine(self.folder / "db.sqlite")
        self.scenario, self.task = scenario, task
        info: dict[str, Any] = {"scenario": scenario, "task_idx": task["index"], "tools": self.tools()}
        if reveals_hidden(options):
            info["verifiers"] = task["verifiers"]
        return ResetResult(task["task"], info)

    def tools(self) -> list[dict[str, Any]]:
        assert self.world is not None
        return [tool.mcp() for tool in self.world.tools.values()] + [SUBMIT]

    async def step(self, action: Any) -> StepResult:
        assert self.world is not None
        names = [*self.world.tools, SUBMIT["name"]]
        call = await read_action(find_tool_call, action, names)
        rewards = self.factory.manifest.rewards
        if isinstance(call, str):
            return invalid_action(call, reward=rewards.format_error)
        if call["name"] == SUBMIT["name"]:
            return await self._submit(call["arguments"].get("final_answer"))
        tool: Tool = self.world.tools[call["name"]]
        text, failed = await call_tool(self.world, tool, call["arguments"], self.engine)
        return StepResult(text, 0.0, info={"tool": tool.name, "is_error": failed})

    async def _submit(self, answer: Any) -> StepResult:
        assert self.folder is not None
        rewards = self.factory.manifest.rewards
        code = (self.factory.root / self.scenario / f"verify_{self.task['index']}.py").read_text()
        verdict = await verify(code, self.folder / "initial.sqlite", self.folder / "db.sqlite",
                               answer if isinstance(answer, str) else json.dumps(answer),
                               self.factory.manifest.verifier_timeout)
        info: dict[str, Any] = {"complete": verdict.complete}
        if verdict.error is not None:
            info["error"] = verdict.error
        reward = rewards.complete if verdict.complete else rewards.incomplete
        return StepResult("complete" if verdict.complete else "incomplete", reward, True, info=info)

    def extras(self) -> dict[str, Any]:
        return {"scenario": self.scenario, "task_idx": self.task.get("index")} if self.scenario else {}

    async def _end_episode(self) -> None:
        engine, folder, self.engine, self.folder = self.engine, self.folder, None, None
        if engine is not None:
            engine.dispose()
        if folder is not None:
            await asyncio.to_thread(shutil.rmtree, folder, True)

    async def close(self) -> None:
        await self._end_episode()


def _copy_pair(template: Path, folder: Path) -> None:
    """The episode's database and the verifier's snapshot of how it began, both copies of the template."""
    shutil.copyfile(template, folder / "db.sqlite")
    shutil.copyfile(template, folder / "initial.sqlite")


def load_awm_environment(manifest: AwmManifest) -> AwmFactory:
    return AwmFactory(manifest)

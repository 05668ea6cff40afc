"""Serve Agent World Model's tool worlds (manifest kind "awm") in process: thousands of sessions per worker,
no process per session.

reset:  the task (options scenario + task_idx, a seeded choice of the scenario's tasks without task_idx; or
        the catalog's task, or split + index, over every scenario's tasks ("scenario/task_idx" is a task's id), or
        a seeded choice); the episode's database is a copy of the scenario's template, with a snapshot of it for the
        verifier. Observation: the task's text; info["tools"]: the world's tools (as MCP lists them, read as ours).
step:   a tool call (an object or model text) runs the endpoint (worlds.py); its answer is the observation.
        `submit(final_answer)` ends the episode: the verifier (verify.py, in a child process; code mode, or
        SQL mode with an LLM judge, judge.py) says complete or not, and the reward is the `complete` or
        `incomplete` value (manifest `rewards`, or the reset option of that name). An action with no usable tool
        call is answered with the `format_error` reward; the episode goes on. With the reset option parity=True,
        actions follow AWM's own agent protocol instead (parity.py), where a turn with no call is the answer.
close:  the episode's files are removed (also when a failure or the reaper ends the session); a worker that
        died leaves a folder that the next worker to start removes.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import os
import random
import shutil
import tempfile
from pathlib import Path
from typing import Any

from openenv_gym.adapters.awm import parity
from openenv_gym.adapters.awm.judge import Judge
from openenv_gym.adapters.awm.verify import SQL_ENTRY, Verdict, run_verifier, verify
from openenv_gym.adapters.awm.worlds import World, Worlds, call_tool
from openenv_gym.adapters.environment import Environment
from openenv_gym.adapters.long_text import read_action
from openenv_gym.episode.options import CATALOG_OPTIONS, vocabulary
from openenv_gym.episode.results import ResetResult, StepResult, invalid_action
from openenv_gym.episode.tasks import TASK_OPTIONS, choose_task, reveals_hidden, splits_with_counts
from openenv_gym.episode.toolcalls import find_tool_call
from openenv_gym.errors import BadRequestError
from openenv_gym.manifests.awm_names import scenario_key
from openenv_gym.manifests.judge_endpoint import HOW_TO_GIVE
from openenv_gym.manifests.schema import AwmManifest, AwmRewards
from openenv_gym.runtime.lifetime import process_runs

SPLIT = "train"  # every scenario's tasks, in index order: one catalog over all of them
SCRATCH_PREFIX = "openenv-gym-awm-"  # + the worker's pid: its episode files
MODES = ("code", "sql")
# AWM's own reset vocabulary (its task as scenario and task_idx; how the episode is verified, rewarded, prompted)
OPTIONS = ("scenario", "task_idx", "verifier_mode", "rewards", "system_prompt", "parity")
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
        remove_orphans(Path(tempfile.gettempdir()))
        self.scratch = Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-"))
        atexit.register(shutil.rmtree, self.scratch, True)
        self.worlds = Worlds(self.root, self.scratch, manifest.max_loaded)
        self.judge = Judge.from_environment()

    def __call__(self) -> AwmSession:
        return AwmSession(self)

    def describe(self) -> dict[str, Any]:
        return {"name": self.manifest.name, "description": self.manifest.description, "action": "tools",
                "tools": [], "max_steps": self.manifest.max_steps, "source": "awm",
                "scenarios": [world["name"] for world in self.index],
                "reset_options": vocabulary(CATALOG_OPTIONS, OPTIONS)}

    # -- catalog ---------------------------------------------------------------------------------

    async def splits(self) -> list[dict[str, str]]:
        return [{"name": SPLIT, "type": "train"}]

    async def num_tasks(self, split: str) -> int:
        return len(self.catalog_entries)

    async def catalog(self) -> list[dict[str, Any]]:
        return await splits_with_counts(self)

    async def tasks(self, split: str, window: range, reveal: bool) -> list[dict]:
        """Every task is listed with its text (observations show it too); the verifiers stay on the server."""
        entries = self.catalog_entries
        return [{"index": i, "id": f"{entries[i][0]}/{entries[i][1]['index']}", "scenario": entries[i][0],
                 "task_idx": entries[i][1]["index"], "task": entries[i][1]["task"]}
                for i in window if i < len(entries)]

    async def pick(self, seed: int | None, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """(scenario, task entry) of a reset: AWM's own scenario and task_idx, else the catalog's vocabulary."""
        if "scenario" not in options:
            if "task_idx" in options:
                raise BadRequestError("option task_idx is a task of the scenario option: give the scenario too")
            chosen = await choose_task(self, self.manifest.name, seed, options)
            return self.catalog_entries[chosen["index"]]
        if options.keys() & set(TASK_OPTIONS):
            raise BadRequestError("option scenario (with task_idx) names a task, and so do task, split and index: "
                                  "give one of them")
        given = options["scenario"]  # its name, or its display name (AWM's files give both)
        world = self.by_name.get(given) or self.by_name.get(scenario_key(given)) if isinstance(given, str) else None
        if world is None:
            raise BadRequestError(f"unknown scenario {options['scenario']!r}; scenarios: "
                                  f"{', '.join(list(self.by_name)[:20])}")
        tasks = {task["index"]: task for task in world["tasks"]}
        if not tasks:
            raise BadRequestError(f"scenario {world['name']} has no task with a verifier")
        task_idx = options.get("task_idx")
        if "task_idx" not in options:  # a seeded choice, as the catalog's
            task_idx = sorted(tasks)[random.Random(seed).randrange(len(tasks))]
        if task_idx not in tasks:
            raise BadRequestError(f"scenario {world['name']} has no task {task_idx!r} with a verifier; its tasks: "
                                  f"{sorted(tasks)}")
        return world["name"], tasks[task_idx]


class AwmSession(Environment):
    def __init__(self, factory: AwmFactory) -> None:
        self.factory = factory
        self.folder: Path | None = None  # the episode's files: db.sqlite and initial.sqlite
        self.world: World | None = None
        self.task: dict[str, Any] = {}
        self.scenario = ""
        self.mode = "code"
        self.parity = False
        self.rewards = factory.manifest.rewards
        self.trajectory: list[dict[str, Any]] = []  # the tool calls and results, for an LLM judge

    def _settings(self, task: dict[str, Any], options: dict[str, Any]) -> None:
        """The episode's verifier mode, protocol and rewards, from the reset options; refused with a message."""
        mode = options.get("verifier_mode") or ("code" if "code" in task["verifiers"] else "sql")
        if mode not in MODES or mode not in task["verifiers"]:
            raise BadRequestError(f"verifier_mode {mode!r}: this task has verifiers for {', '.join(task['verifiers'])}")
        if mode == "sql" and self.factory.judge is None:
            raise BadRequestError(f"this task is verified in SQL mode, by an LLM judge: {HOW_TO_GIVE}")
        try:
            self.rewards = self.factory.manifest.rewards.model_copy(
                update=AwmRewards.model_validate(options.get("rewards") or {}).model_dump(exclude_unset=True))
        except ValueError as exc:
            raise BadRequestError(f"option rewards: {exc}") from None
        if not isinstance(options.get("system_prompt", ""), str):
            raise BadRequestError("option system_prompt must be a string")
        self.mode, self.parity = mode, bool(options.get("parity", False))

    async def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> ResetResult:
        options = options or {}
        scenario, task = await self.factory.pick(seed, options)
        self._settings(task, options)
        await self._end_episode()
        self.world = await self.factory.worlds.get(scenario)
        self.folder = Path(await asyncio.to_thread(tempfile.mkdtemp, dir=self.factory.scratch))
        template = self.factory.root / scenario / "template.db"
        await asyncio.to_thread(_copy_pair, template, self.folder)
        self.scenario, self.task, self.trajectory = scenario, task, []
        info: dict[str, Any] = {"scenario": scenario, "task_idx": task["index"], "verifier_mode": self.mode}
        if self.parity:
            prompt = options.get("system_prompt") or parity.SYSTEM_PROMPT
            info["messages"] = [{"role": "system", "content": prompt}, {"role": "user", "content": task["task"]}]
        else:
            info["tools"] = self.tools()
        if reveals_hidden(options):
            info["verifiers"] = task["verifiers"]
        return ResetResult(task["task"], info)

    def tools(self) -> list[dict[str, Any]]:
        assert self.world is not None
        return [tool.mcp() for tool in self.world.tools.values()] + [SUBMIT]

    async def step(self, action: Any) -> StepResult:
        if self.parity:
            return await self._parity_step(action)
        assert self.world is not None
        call = await read_action(find_tool_call, action, [*self.world.tools, SUBMIT["name"]])
        if isinstance(call, str):
            return invalid_action(call, reward=self.rewards.format_error)
        if call["name"] == SUBMIT["name"]:
            return await self._submit(call["arguments"].get("final_answer"))
        return await self._run(call["name"], call["arguments"])

    async def _parity_step(self, action: Any) -> StepResult:
        assert self.world is not None
        parsed = await read_action(parity.parse, action)
        if parsed.kind == "final":
            return await self._submit(parsed.text)
        if parsed.kind == "list":
            return StepResult(parity.listing([tool.mcp() for tool in self.world.tools.values()]))
        if parsed.kind == "call" and parsed.tool in self.world.tools:
            return await self._run(parsed.tool, parsed.arguments or {})
        text = parsed.text or f"Error: Unknown tool '{parity.PREFIX}{parsed.tool}'. Call list_tools to see them."
        return StepResult(text, self.rewards.format_error, info={"error": {"code": "invalid_action", "message": text}})

    async def _run(self, name: str, arguments: dict[str, Any]) -> StepResult:
        assert self.world is not None
        assert self.folder is not None
        text, failed = await call_tool(self.world, self.world.tools[name], arguments, self.folder / "db.sqlite")
        self.trajectory.append({"tool": name, "arguments": arguments, "result": text[:2000]})
        return StepResult(text, 0.0, info={"tool": name, "is_error": failed})

    async def _submit(self, answer: Any) -> StepResult:
        assert self.folder is not None
        answer = answer if isinstance(answer, str) else json.dumps(answer)
        verdict = await (self._judged(answer) if self.mode == "sql" else verify(
            await self._verifier(".py"), self.folder / "initial.sqlite", self.folder / "db.sqlite", answer,
            self.factory.manifest.verifier_timeout))
        info: dict[str, Any] = {"complete": verdict.complete}
        if verdict.error is not None:
            info["error"] = verdict.error
        reward = self.rewards.complete if verdict.complete else self.rewards.incomplete
        return StepResult("complete" if verdict.complete else "incomplete", reward, True, info=info)

    async def _verifier(self, suffix: str) -> str:
        return await asyncio.to_thread((self.factory.root / self.scenario / f"verify_{self.task['index']}{suffix}")
                                       .read_text)

    async def _judged(self, answer: str) -> Verdict:
        """SQL mode: the verifier's facts of both databases, classified by the judge."""
        assert self.folder is not None and self.factory.judge is not None
        timeout = self.factory.manifest.verifier_timeout
        facts, error = await run_verifier(await self._verifier(".sql.py"), SQL_ENTRY, self.folder / "initial.sqlite",
                                          self.folder / "db.sqlite", answer, timeout)
        if error is not None:
            return Verdict(False, error)
        classification, error = await self.factory.judge.classify(self.task["task"], self.trajectory, answer, facts,
                                                                  timeout)
        return Verdict(classification == "complete", error)

    def extras(self) -> dict[str, Any]:
        return {"scenario": self.scenario, "task_idx": self.task.get("index")} if self.scenario else {}

    async def _end_episode(self) -> None:
        folder, self.folder = self.folder, None
        if folder is not None:
            await asyncio.to_thread(shutil.rmtree, folder, True)

    async def close(self) -> None:
        await self._end_episode()


def remove_orphans(root: Path) -> None:
    """Remove the episode folders of workers that died without cleaning up (killed, say)."""
    for folder in root.glob(f"{SCRATCH_PREFIX}*"):
        pid = folder.name.removeprefix(SCRATCH_PREFIX).split("-")[0]
        if pid.isdigit() and not process_runs(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)


def _copy_pair(template: Path, folder: Path) -> None:
    """The episode's database and the verifier's snapshot of how it began, both copies of the template."""
    shutil.copyfile(template, folder / "db.sqlite")
    shutil.copyfile(template, folder / "initial.sqlite")


def load_awm_environment(manifest: AwmManifest) -> AwmFactory:
    return AwmFactory(manifest)

"""Run ORS / OpenReward environment classes (manifest kind "ors") in process, one instance per session.

reset:  pick a task (options split+index, or task_spec, or a seeded choice from the first split),
        build `Env(task_spec, secrets)`, run `setup()`, and render `get_prompt()` as the observation.
step:   a tool call (`{"name", "arguments"}` or model text holding one) runs `_call_tool`; the output's
        blocks are the observation, `reward` the reward (None becomes 0.0, the raw value is in info),
        `finished` ends the episode (later steps are refused, as ORS does), a step limit truncates.
close:  `teardown()`.
Async methods run on the worker's event loop; plain ones in a thread, off it. The task_spec (which
often holds the answer) never reaches observation or info unless reset is given expose_task=True.
"""

from __future__ import annotations

import asyncio
import inspect
import os
from typing import Any

from openenv_gym.adapters.vendored import load_vendored
from openenv_gym.environment import Environment, ResetResult, StepResult, invalid_action
from openenv_gym.errors import BadRequestError
from openenv_gym.manifest import Manifest, ManifestError
from openenv_gym.ors_common import render_blocks, split_entry, step_from_tool_result, tool_spec
from openenv_gym.task_choice import choose_task, resolve_split, splits_with_counts
from openenv_gym.toolcalls import find_tool_call

DEFAULT_MAX_STEPS = 100


async def call_user(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Await an async callable on this loop; run a plain one in a thread (it may block)."""
    if inspect.iscoroutinefunction(fn):
        return await fn(*args, **kwargs)
    result = await asyncio.to_thread(fn, *args, **kwargs)
    return await result if inspect.isawaitable(result) else result


# Both SDKs log every tool call at info level, with loggers whose level they read from these variables
# when they are imported; a level the user set is kept.
SDK_LOG_LEVELS = ("OPENREWARD_LOG_LEVEL", "ORS_LOG_LEVEL")


def quiet_sdk_logging() -> None:
    """Keep the SDKs' warnings and errors only. Must run before the source (and the SDK) is imported."""
    for variable in SDK_LOG_LEVELS:
        os.environ.setdefault(variable, "WARNING")


class OrsFactory:
    """Makes one OrsSession per session and answers catalog questions (splits, tasks) for the class."""

    def __init__(self, env_class: type, manifest: Manifest) -> None:
        self.env_class = env_class
        self.name = manifest.name
        self.max_steps = int(getattr(manifest, "max_steps", None) or DEFAULT_MAX_STEPS)
        listed = env_class.list_tools()
        self.tools = [tool_spec(t.model_dump()) for t in listed.tools]
        terminal = getattr(listed, "terminal_tool", None)
        self.terminal = None if terminal is None else {"name": terminal.name, "arg": terminal.arg}
        self.tool_names = {t["name"] for t in self.tools} | ({terminal.name} if terminal else set())

    def __call__(self) -> OrsSession:
        return OrsSession(self)

    def describe(self) -> dict[str, Any]:
        doc = (self.env_class.__doc__ or "").strip().split("\n")[0]
        return {"name": self.name, "description": doc, "action": "tools", "tools": self.tools,
                "max_steps": self.max_steps, "source": "ors", "class": self.env_class.__name__,
                "terminal_tool": self.terminal}

    # -- catalog -------------------------------------------------------------------------------

    async def splits(self) -> list[dict[str, str]]:
        return [split_entry(s) for s in await call_user(self.env_class.list_splits)]

    async def _split(self, split: Any) -> str:
        return await resolve_split(self, self.name, split)

    async def num_tasks(self, split: Any = None) -> int:
        return int(await self.env_class.num_tasks(await self._split(split)))

    async def tasks(self, split: Any = None, start: int | None = None,
                    stop: int | None = None) -> tuple[str, list[dict]]:
        """(split name, its tasks[start:stop]); the first split when none is named."""
        split = await self._split(split)
        try:
            return split, list(await self.env_class.get_task_range(split, start, stop))
        except NotImplementedError:  # only num_tasks/get_task: fetch by index
            indices = range(await self.num_tasks(split))[start:stop]
            return split, [await self.env_class.get_task(split, i) for i in indices]

    async def catalog(self) -> list[dict[str, Any]]:
        """Splits with their task counts."""
        return await splits_with_counts(self)

    async def pick_task(self, seed: int | None, options: dict) -> tuple[dict, dict[str, Any]]:
        """The task of a reset and where it came from ({} or {"split", "index"})."""
        chosen = await choose_task(self, self.name, seed, options)
        if "task_spec" in chosen:
            return chosen["task_spec"], {}
        return await self.env_class.get_task(chosen["split"], chosen["index"]), chosen


class OrsSession(Environment):
    def __init__(self, factory: OrsFactory) -> None:
        self.factory = factory
        self.env: Any = None
        self.steps = 0
        self.limit = factory.max_steps

    async def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> ResetResult:
        options = options or {}
        secrets = options.get("secrets") or {}
        if not isinstance(secrets, dict) or not all(isinstance(v, str) for v in secrets.values()):
            raise BadRequestError("option secrets must be an object of string values")
        task, where = await self.factory.pick_task(seed, options)
        await self.close()  # the previous episode's instance
        self.env = await asyncio.to_thread(self.factory.env_class, task_spec=task, secrets=secrets)
        await call_user(self.env.setup)
        obs, images = render_blocks([b.model_dump() for b in await call_user(self.env.get_prompt)])
        self.steps = 0
        self.limit = int(options.get("max_steps") or self.factory.max_steps)
        info: dict[str, Any] = dict(where)
        if images:
            info["images"] = images
        if options.get("expose_task"):
            info["task_spec"] = task
        return ResetResult(obs, info)

    def _call_of(self, action: Any) -> dict | str:
        call = find_tool_call(action, self.factory.tool_names)
        terminal = self.factory.terminal
        if isinstance(call, str) and isinstance(action, str) and terminal is not None:
            # plain text with no tool call is the final answer, as ORS harnesses route it
            return {"name": terminal["name"], "arguments": {terminal["arg"]: action} if terminal["arg"] else {}}
        return call

    async def step(self, action: Any) -> StepResult:
        self.steps += 1
        truncated = self.steps >= self.limit
        call = self._call_of(action)
        if isinstance(call, str):
            return invalid_action(call, truncated=truncated)
        ran = await self.env._call_tool(call["name"], call["arguments"])
        return step_from_tool_result(ran.model_dump(), truncated)

    async def close(self) -> None:
        env, self.env = self.env, None
        if env is not None:
            await call_user(env.teardown)


def load_ors_environment(manifest: Manifest) -> OrsFactory:
    quiet_sdk_logging()
    env_class = load_vendored(manifest)
    if not isinstance(env_class, type) or not hasattr(env_class, "_call_tool"):
        raise ManifestError(f"{manifest.folder}: {manifest.entry} is not an ORS Environment class")
    return OrsFactory(env_class, manifest)

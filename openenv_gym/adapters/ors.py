"""Run ORS / OpenReward environment classes (manifest kind "ors") in process, one instance per session.

reset:  pick a task (options split+index, or task_spec, or a seeded choice from the first split),
        build `Env(task_spec, secrets)`, run `setup()`, and render `get_prompt()` as the observation.
step:   a tool call (`{"name", "arguments"}` or model text holding one) runs `_call_tool`; the output's
        blocks are the observation, `reward` the reward, `finished` ends the episode (the ORS shapes and
        their rules are in protocol/ors.py, shared with the HTTP transport). An episode whose task offers
        task-only tools (`list_task_tools()`, `@tool(shared=False)`) lists all its tools in info["tools"].
close:  `teardown()`.
Async methods run on the worker's event loop; plain ones in a thread, off it. The task_spec (which
often holds the answer) never reaches observation or info unless reset is given expose_task=True.
"""

from __future__ import annotations

import asyncio
import inspect
import os
from typing import Any

from openenv_gym.adapters.environment import Environment
from openenv_gym.adapters.long_text import read_action
from openenv_gym.adapters.vendored import load_vendored
from openenv_gym.episode.results import ResetResult, StepResult, invalid_action
from openenv_gym.episode.tasks import TASK_SPEC, choose_task, resolve_split, reveals_hidden, splits_with_counts
from openenv_gym.manifests.schema import ManifestError, OrsManifest
from openenv_gym.protocol.ors import (
    RESET_OPTIONS,
    ToolListing,
    render_blocks,
    secrets_of,
    split_entry,
    step_from_tool_result,
)


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

    def __init__(self, env_class: type, manifest: OrsManifest) -> None:
        self.env_class = env_class
        self.name = manifest.name
        self.max_steps = manifest.max_steps
        self.listing = ToolListing.from_wire(env_class.list_tools().model_dump())

    def __call__(self) -> OrsSession:
        return OrsSession(self)

    def describe(self) -> dict[str, Any]:
        doc = (self.env_class.__doc__ or "").strip().split("\n")[0]
        return {"name": self.name, "description": doc, "action": "tools", "tools": self.listing.tools,
                "max_steps": self.max_steps, "source": "ors", "class": self.env_class.__name__,
                "terminal_tool": self.listing.terminal, "reset_options": RESET_OPTIONS}

    # -- catalog -------------------------------------------------------------------------------

    async def splits(self) -> list[dict[str, str]]:
        return [split_entry(s) for s in await call_user(self.env_class.list_splits)]

    async def _split(self, split: Any) -> str:
        return await resolve_split(self, self.name, split)

    async def num_tasks(self, split: Any = None) -> int:
        return int(await self.env_class.num_tasks(await self._split(split)))

    async def tasks(self, split: str, window: range, reveal: bool) -> list[dict]:
        """The tasks of a catalog listing: their specs when revealed, else only their indices (a task spec
        often holds the answer, and the policy never sees it)."""
        if not reveal:
            return [{"index": i} for i in window]
        try:
            return list(await self.env_class.get_task_range(split, window.start, window.stop))
        except NotImplementedError:  # only num_tasks/get_task: fetch by index
            return [await self.env_class.get_task(split, i) for i in window]

    async def catalog(self) -> list[dict[str, Any]]:
        """Splits with their task counts."""
        return await splits_with_counts(self)

    async def pick_task(self, seed: int | None, options: dict) -> tuple[dict, dict[str, Any]]:
        """The task of a reset and where it came from ({} or {"split", "index"})."""
        chosen = await choose_task(self, self.name, seed, options)
        if TASK_SPEC in chosen:
            return chosen[TASK_SPEC], {}
        return await self.env_class.get_task(chosen["split"], chosen["index"]), chosen


class OrsSession(Environment):
    def __init__(self, factory: OrsFactory) -> None:
        self.factory = factory
        self.env: Any = None
        self.listing = factory.listing  # the class's tools, plus the episode's task tools

    async def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> ResetResult:
        options = options or {}
        secrets = secrets_of(options)
        task, where = await self.factory.pick_task(seed, options)
        await self.close()  # the previous episode's instance
        self.env = await asyncio.to_thread(self.factory.env_class, task_spec=task, secrets=secrets)
        await call_user(self.env.setup)
        obs, images = render_blocks([b.model_dump() for b in await call_user(self.env.get_prompt)])
        info: dict[str, Any] = dict(where)
        if images:
            info["images"] = images
        self.listing = self.factory.listing
        if hasattr(self.env, "list_task_tools"):  # task-only tools (@tool(shared=False)) this episode offers
            listed = await call_user(self.env.list_task_tools)
            self.listing = self.listing.with_task_tools(listed.model_dump()["tools"])
        if self.listing is not self.factory.listing:
            info["tools"] = self.listing.tools
        if reveals_hidden(options):
            info[TASK_SPEC] = task
        return ResetResult(obs, info)

    async def step(self, action: Any) -> StepResult:
        call = await read_action(self.listing.call_of, action)
        if isinstance(call, str):
            return invalid_action(call)
        ran = await self.env._call_tool(call["name"], call["arguments"])
        return step_from_tool_result(ran.model_dump())

    async def close(self) -> None:
        env, self.env = self.env, None
        if env is not None:
            await call_user(env.teardown)


def load_ors_environment(manifest: OrsManifest) -> OrsFactory:
    quiet_sdk_logging()
    env_class = load_vendored(manifest)
    if not isinstance(env_class, type) or not hasattr(env_class, "_call_tool"):
        raise ManifestError(f"{manifest.folder}: {manifest.entry} is not an ORS Environment class")
    return OrsFactory(env_class, manifest)

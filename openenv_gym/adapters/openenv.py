"""Run OpenEnv environments (manifest kind "openenv": an `Environment` subclass of an OpenEnv project) in
process, many sessions per worker, in a venv with the `openenv` package.

reset:  the instance is made at the session's first reset (in a thread: constructors may be heavy); an
        MCPEnvironment's MCP session is opened once, as OpenEnv's server does. `reset(seed, episode_id, **options)`
        gets the options as keyword arguments; one its signature does not take is refused with those it takes
        (OpenEnv's server drops it without a word), unless it takes **kwargs.
step:   the action becomes the env's Action (protocol/openenv_payloads.py: tool calls for MCP envs, objects, or
        text for a one-text-field model), validated by the Action model; a refused action is an invalid-action
        observation (on the OpenEnv front end, `refusal` makes it OpenEnv's VALIDATION_ERROR instead).
        `step_async` runs on the event loop when the env overrides it, else `step` in a thread.
describe: the Action model's schema, and those of the Observation and State models, as OpenEnv's /schema shows.
state:  the env's `state` beyond episode_id and step_count is the session's extras.
An env that does not declare SUPPORTS_CONCURRENT_SESSIONS = True gets one session per worker process: its
instances may share state, and OpenEnv itself serves such an env one session at a time.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import typing
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

from pydantic import ValidationError
from pydantic_core import to_jsonable_python

from openenv_gym.adapters.environment import Environment
from openenv_gym.adapters.long_text import read_action
from openenv_gym.adapters.openenv_image import OpenEnvImageFactory
from openenv_gym.adapters.vendored import load_vendored
from openenv_gym.episode.options import vocabulary
from openenv_gym.episode.results import ResetResult, StepResult, invalid_action
from openenv_gym.episode.state import MAX_STEPS_OPTION
from openenv_gym.errors import CapacityError
from openenv_gym.manifests.schema import ManifestError, OpenEnvManifest
from openenv_gym.protocol.openenv_payloads import (
    reset_from_payload,
    state_extras,
    step_from_payload,
    text_field,
    wire_action,
)
from openenv_gym.protocol.tool_specs import as_tool

PAYLOAD_FIELDS = frozenset({"reward", "done"})  # sent next to the observation, not in it


def _load_attribute(where: str) -> Any:
    module, _, attribute = where.partition(":")
    return getattr(importlib.import_module(module), attribute)


def _overrides(env_class: type, name: str) -> bool:
    """Whether the class overrides OpenEnv's default `reset_async`/`step_async` (which call the sync ones)."""
    from openenv.core.env_server.interfaces import Environment as OpenEnvEnvironment

    return getattr(env_class, name) is not getattr(OpenEnvEnvironment, name)


def payload(observation: Any) -> dict[str, Any]:
    """An observation as OpenEnv's server puts it on the wire (its serialize_observation, as JSON)."""
    wire = {"observation": observation.model_dump(mode="json", exclude=PAYLOAD_FIELDS),
            "reward": observation.reward, "done": observation.done}
    if observation.metadata:
        wire["metadata"] = to_jsonable_python(observation.metadata)
    return wire


def reset_keywords(method: Any) -> list[str] | None:
    """The keyword arguments an env's reset takes besides the seed and self (None: any, it takes **kwargs)."""
    parameters = inspect.signature(method).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return None
    keywords = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return [name for name, p in parameters.items() if p.kind in keywords and name not in ("self", "seed")]


def _accepted(method: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments `method` takes (all of them if it has **kwargs), as OpenEnv's server filters them."""
    parameters = inspect.signature(method).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return kwargs
    return {key: value for key, value in kwargs.items() if key in parameters}


def _generic_models(env_class: type) -> tuple[type | None, type | None]:
    """(Observation, State) that the class's base Environment[Action, Observation, State] names, if it does."""
    from openenv.core.env_server.interfaces import Environment as OpenEnvEnvironment

    for klass in env_class.__mro__:
        for base in getattr(klass, "__orig_bases__", ()):
            origin = typing.get_origin(base)
            if isinstance(origin, type) and issubclass(origin, OpenEnvEnvironment):
                named = [arg if isinstance(arg, type) else None for arg in typing.get_args(base)] + [None] * 3
                return named[1], named[2]
    return None, None


def _models(env_class: type, manifest: OpenEnvManifest) -> dict[str, type]:
    """The models OpenEnv's server of the env publishes at /schema besides the Action: those the import found in
    create_app(...), else those the env class's generic base names, else OpenEnv's base Observation and State; the
    reset observation is the observation unless named (create_app's defaults)."""
    from openenv.core.env_server.types import Observation, State

    observation, state = _generic_models(env_class)
    models = {"observation": _load_attribute(manifest.observation) if manifest.observation else observation,
              "state": _load_attribute(manifest.state) if manifest.state else state}
    models = {"observation": models["observation"] or Observation, "state": models["state"] or State}
    models["reset_observation"] = (_load_attribute(manifest.reset_observation) if manifest.reset_observation
                                   else models["observation"])  # as create_app defaults it
    return models


class OpenEnvFactory:
    def __init__(self, env_class: type, action_class: type, manifest: OpenEnvManifest) -> None:
        from openenv.core.env_server.serialization import deserialize_action

        self.env_class, self.action_class, self.manifest = env_class, action_class, manifest
        # each session's instance is made as the project's server makes it: with its factory, else the class
        self.make = _load_attribute(manifest.factory) if manifest.factory else env_class
        self.models = _models(env_class, manifest)
        self.deserialize = deserialize_action
        self.async_reset, self.async_step = _overrides(env_class, "reset_async"), _overrides(env_class, "step_async")
        self.reset_keywords = reset_keywords(env_class.reset_async if self.async_reset else env_class.reset)
        self.concurrent = bool(getattr(env_class, "SUPPORTS_CONCURRENT_SESSIONS", False))
        # Playwright-style envs need every call on one thread, as OpenEnv's server runs them
        self.executor = ThreadPoolExecutor(1, "openenv-single") if getattr(
            env_class, "REQUIRES_SINGLE_THREAD_EXECUTOR", False) else None
        self.schema = action_class.model_json_schema()
        self.text_to = text_field(self.schema)
        self.tools = self._list_tools()
        self.to_wire = partial(wire_action, tools=self.tools, text_to=self.text_to)
        self.live = 0

    def _list_tools(self) -> list[dict] | None:
        """An MCP environment's tools, listed by a probe instance (None: not an MCP environment)."""
        from openenv.core.env_server.mcp_environment import MCPEnvironment
        from openenv.core.env_server.mcp_types import ListToolsAction

        if not issubclass(self.env_class, MCPEnvironment):
            return None
        probe = self.make()
        try:
            listed = probe.step(ListToolsAction())
        finally:
            probe.close()
        return [as_tool(to_jsonable_python(tool)) for tool in listed.tools]

    def __call__(self) -> OpenEnvSession:
        if not self.concurrent and self.live >= 1:
            raise CapacityError(
                f"{self.manifest.name}'s class {self.env_class.__name__} does not declare SUPPORTS_CONCURRENT_SESSIONS"
                " = True, so its instances may share state: one session per worker process. Serve it with more "
                "workers (openenv-gym serve --workers N), or set the flag if its instances share nothing")
        self.live += 1
        return OpenEnvSession(self)

    def describe(self) -> dict[str, Any]:
        doc = (self.env_class.__doc__ or "").strip().split("\n")[0]
        return {"name": self.manifest.name, "description": self.manifest.description or doc,
                "action": "tools" if self.tools is not None else "text", "tools": self.tools or [],
                "max_steps": self.manifest.max_steps, "source": "openenv", "class": self.env_class.__name__,
                "action_schema": self.schema, "concurrent_sessions": self.concurrent,
                "reset_options": None if self.reset_keywords is None else vocabulary(self.reset_keywords),
                **{f"{name}_schema": model.model_json_schema() for name, model in self.models.items()}}

    def typed(self, wire: dict[str, Any]) -> Any:
        """The env's Action for an OpenEnv action; ValueError, saying why, if its Action model refuses it."""
        try:
            return self.deserialize(wire, self.action_class)
        except ValidationError as exc:
            raise ValueError(f"the action does not fit {self.action_class.__name__}: {exc.error_count()} error(s): "
                             f"{exc.errors(include_url=False)[:3]}") from None

    async def call(self, method: Any, *args: Any, **kwargs: Any) -> Any:
        """A sync env method: in a thread (the env's one thread if it asks for one), or inline if the import
        said its sync methods are quick (inline_sync)."""
        if self.manifest.inline_sync:
            return method(*args, **kwargs)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.executor, partial(method, *args, **kwargs))


class OpenEnvSession(Environment):
    def __init__(self, factory: OpenEnvFactory) -> None:
        self.factory = factory
        self.checked: tuple[Any, Any] | None = None  # (an action refusal() let through, the env's Action of it)
        self.env: Any = None
        self.holder: asyncio.Task | None = None  # holds an MCP environment's MCP session open
        self.release = asyncio.Event()
        self.closed = False

    async def _instance(self) -> Any:
        if self.env is None:
            self.env = await self.factory.call(self.factory.make)
            if hasattr(self.env, "mcp_session"):
                opened = asyncio.get_running_loop().create_future()
                self.holder = asyncio.create_task(self._hold(self.env, opened))
                await opened
        return self.env

    async def _hold(self, env: Any, opened: asyncio.Future) -> None:
        """MCP tools are called through one MCP session per instance, held while it lives, as OpenEnv's server
        does. It is entered and left in this one task (anyio's cancel scopes must be)."""
        try:
            async with env.mcp_session():
                opened.set_result(None)
                await self.release.wait()
        except BaseException as exc:
            if not opened.done():
                opened.set_exception(exc)
            raise

    async def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> ResetResult:
        env = await self._instance()
        # the server checked the options against the signature; the step limit is the server's own
        kwargs = {key: value for key, value in (options or {}).items() if key != MAX_STEPS_OPTION} | {"seed": seed}
        if self.factory.async_reset:
            observation = await env.reset_async(**_accepted(env.reset_async, kwargs))
        else:
            observation = await self.factory.call(env.reset, **_accepted(env.reset, kwargs))
        return reset_from_payload(payload(observation))

    def refusal(self, action: Any) -> str | None:
        """Why the Action model refuses an action object (text is read when it steps), as OpenEnv's server checks
        it before stepping. What it lets through is kept for the step that follows, not validated twice."""
        if type(action) is not dict:
            return None
        wire = self.factory.to_wire(action)
        if type(wire) is str:
            return None  # not the Action model's matter: the step answers it
        try:
            self.checked = (action, self.factory.typed(wire))
        except ValueError as exc:
            return str(exc)
        return None

    async def step(self, action: Any) -> StepResult:
        factory = self.factory
        checked, self.checked = self.checked, None
        if checked is not None and checked[0] is action:
            typed = checked[1]
        else:
            wire = await read_action(factory.to_wire, action)
            if type(wire) is str:
                return invalid_action(wire)
            try:
                typed = factory.typed(wire)
            except ValueError as exc:
                return invalid_action(str(exc))
        if factory.async_step:
            observation = await self.env.step_async(typed)
        elif factory.manifest.inline_sync:  # the per-step path: no coroutine of call() in between
            observation = self.env.step(typed)
        else:
            observation = await factory.call(self.env.step, typed)
        return step_from_payload(payload(observation))

    def extras(self) -> dict[str, Any]:
        if self.env is None:
            return {}
        return state_extras(to_jsonable_python(self.env.state))

    async def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.factory.live -= 1
        env, self.env = self.env, None
        self.release.set()
        try:
            if self.holder is not None:
                await self.holder
        finally:
            if env is not None:
                await self.factory.call(env.close)


def load_openenv_environment(manifest: OpenEnvManifest, endpoint: Any = None, sandboxed: bool = True) \
        -> OpenEnvFactory | OpenEnvImageFactory:
    """In the worker, in its venv; or, imported into its image, its own server in a sandbox per session (which
    calls no model: `endpoint` is not used)."""
    if manifest.image is not None:
        return OpenEnvImageFactory(manifest, sandboxed)
    try:
        import openenv.core.env_server  # noqa: F401  (the venv must hold the openenv package)
    except ImportError as exc:
        raise ManifestError(f"{manifest.name} is an OpenEnv environment, which runs in a venv with the openenv "
                            f"package ({exc}); serve it with openenv-gym serve, which builds that venv") from None
    env_class = load_vendored(manifest, first=manifest.app)
    action_class = _load_attribute(manifest.action)
    if not isinstance(env_class, type) or not hasattr(env_class, "reset") or not hasattr(env_class, "step"):
        raise ManifestError(f"{manifest.folder}: {manifest.entry} is not an OpenEnv Environment class")
    return OpenEnvFactory(env_class, action_class, manifest)

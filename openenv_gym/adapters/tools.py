"""Environments whose actions are tool calls: `@tool` methods, schemas and argument checks from pydantic.

    class Vault(ToolEnvironment):
        name = "vault"

        def start(self, *, seed, options):
            return ResetResult("Find the code.")

        @tool
        def try_code(self, code: int) -> StepResult:
            "Try a code; the episode ends when it is right."
            ...

The action is `{"name": "try_code", "arguments": {"code": 7}}` or model text holding such a call
(see episode.toolcalls). Unknown tools, bad arguments and text without a tool call are answered with an
error observation and count as a step; they never raise.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from openenv_gym.adapters.environment import Environment
from openenv_gym.adapters.long_text import is_long_text, read_action
from openenv_gym.episode.results import Action, ResetResult, StepResult, invalid_action
from openenv_gym.episode.toolcalls import find_tool_call

_TOOL_MARK = "__openenv_tool__"


def tool(fn):
    """Mark a method as a tool. Its type hints give the argument schema, its docstring the description."""
    setattr(fn, _TOOL_MARK, True)
    return fn


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    method: Any
    arguments: type[BaseModel]
    validate: Callable[[Any], BaseModel]  # arguments.model_validate, without its per-call keyword handling

    @classmethod
    def from_method(cls, method) -> Tool:
        fields = {}
        for param in list(inspect.signature(method).parameters.values())[1:]:  # skip self
            annotation = Any if param.annotation is inspect.Parameter.empty else param.annotation
            default = ... if param.default is inspect.Parameter.empty else param.default
            fields[param.name] = (annotation, default)
        model = create_model(f"{method.__name__}_arguments", __config__=ConfigDict(extra="forbid"), **fields)
        description = inspect.getdoc(method) or ""
        return cls(method.__name__, description, method, model, model.__pydantic_validator__.validate_python)

    def spec(self) -> dict[str, Any]:
        """The tool as an OpenAI-style function spec."""
        schema = self.arguments.model_json_schema()
        schema.pop("title", None)
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
        return {"name": self.name, "description": self.description, "parameters": schema}


def _describe_validation_error(error: ValidationError) -> str:
    parts = []
    for item in error.errors():
        where = ".".join(str(part) for part in item["loc"]) or "arguments"
        parts.append(f"{where}: {item['msg']}")
    return "; ".join(parts)


class ToolEnvironment(Environment):
    """An environment whose actions are calls of its `@tool` methods. Subclasses implement `start`."""

    action_kind = "tools"
    max_steps: ClassVar[int | None] = 20
    invalid_action_reward: ClassVar[float] = 0.0
    tools: ClassVar[dict[str, Tool]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.tools = {
            name: Tool.from_method(member)
            for name, member in inspect.getmembers(cls, inspect.isfunction)
            if getattr(member, _TOOL_MARK, False)
        }

    @classmethod
    def describe(cls) -> dict[str, Any]:
        return super().describe() | {"tools": [t.spec() for t in cls.tools.values()]}

    def start(self, *, seed: int | None, options: dict[str, Any]) -> ResetResult:
        """Begin an episode: set up the state and return the first observation."""
        raise NotImplementedError

    async def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> ResetResult:
        result = self.start(seed=seed, options=options or {})
        return await result if type(result) is not ResetResult and inspect.isawaitable(result) else result

    async def step(self, action: Action) -> StepResult:
        # read inline unless long: no coroutine of its own on the usual path, which every step takes
        call = await read_action(find_tool_call, action, self.tools) if is_long_text(action) else \
            find_tool_call(action, self.tools)
        if isinstance(call, str):
            return invalid_action(call, reward=self.invalid_action_reward)
        chosen, raw_arguments = self.tools[call["name"]], call["arguments"]
        try:
            arguments = chosen.validate(raw_arguments)
        except ValidationError as exc:
            message = f"bad arguments for {chosen.name}: {_describe_validation_error(exc)}"
            return invalid_action(message, reward=self.invalid_action_reward)
        # the fields as validated (dict(model) would cost three times the validation)
        result = chosen.method(self, **arguments.__dict__)
        if type(result) is StepResult:
            return result
        if inspect.isawaitable(result):
            result = await result
        return StepResult(result) if isinstance(result, str) else result

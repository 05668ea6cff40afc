"""Step a Verifiers rollout from outside: the environment's own loop runs, and its model requests wait.

`env.run_rollout(row, client, ...)` runs as a task with a client whose every model request parks until
the session answers it. So the environment keeps its loop (setup, stop conditions in their order,
env_response, tools, timeouts, cleanup, scoring) and the session only supplies assistant messages:

    rollout = Rollout(env, client_class, row)
    turn = await rollout.next_turn()          # Turn(request=[...]) : the model is asked
    turn = await rollout.answer(message)      # ... or Turn(output={...}): the rollout ended, scored

Also here: messages to JSON and to observation text.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import orjson

from openenv_gym.adapters.policy_turns import PolicyTurns, Turn
from openenv_gym.episode.assistant import REASONING
from openenv_gym.errors import EnvError

MODEL = "policy"  # the model name the environment sees in its state
HINTS = {  # what to do about failures older environments meet on newer verifiers
    "Plain string task": "this environment's rows have a plain-string `task` column, which verifiers 0.1.14 and "
                         "later refuse: pin verifiers==0.1.12 in its pyproject and import it again with --force, "
                         "or drop or rename the column in load_environment()",
}


def callback_client_class(vf: Any) -> type:
    """A vf.Client subclass whose model is an async callable, `CallbackClient(model)`: it gets the prompt
    messages and returns the assistant message {"content", "tool_calls": [{"id", "name", "arguments"}]} (and its
    "reasoning_content", where the policy gave some).
    (vf is the verifiers module; its types are resolved once: from 0.3, each `vf.X` goes through the
    module's __getattr__ and an import_module call.)"""
    tool_call, response_message, response = vf.ToolCall, vf.ResponseMessage, vf.Response

    class CallbackClient(vf.Client):
        def setup_client(self, config: Any) -> None:
            return None

        async def to_native_tool(self, tool: Any) -> Any:
            return tool

        async def to_native_prompt(self, messages: Any) -> tuple[Any, dict]:
            return messages, {}

        async def get_native_response(self, prompt: Any, model: str, sampling_args: Any, tools: Any = None,
                                      **kwargs: Any) -> dict[str, Any]:
            return await self.client(prompt)

        async def raise_from_native_response(self, response: Any) -> None:
            return None

        async def from_native_response(self, message: dict[str, Any]) -> Any:
            calls = [tool_call(**call) for call in message["tool_calls"]] or None
            # (its reasoning where verifiers' own client puts a reasoning parser's: the message's reasoning_content)
            reply = response_message(content=message["content"], tool_calls=calls, is_truncated=False,
                                     finish_reason="tool_calls" if calls else "stop",
                                     reasoning_content=message.get(REASONING))
            return response(id=f"step-{time.monotonic_ns()}", created=int(time.time()), model=MODEL, message=reply)

        async def close(self) -> None:
            return None

    return CallbackClient


class Rollout(PolicyTurns):
    """One `env.run_rollout` task; its model requests become turns (their `request` is the prompt's messages),
    answered one step at a time; a rollout that failed raises EnvError with what to do about it."""

    def __init__(self, env: Any, client_class: type, row: dict[str, Any], scored: bool = True) -> None:
        """scored: run it as `run_rollout` does, scored by the rubric; else as `run_group` runs each of a group's
        rollouts, leaving scoring (and the rubric's cleanup) to `score_group` over the group's states."""
        if scored:
            super().__init__(lambda ask: env.run_rollout(row, client_class(ask), MODEL, {}))
        else:
            super().__init__(lambda ask: env.rollout(row, client_class(ask), MODEL, {}))

    async def next_turn(self) -> Turn:
        try:
            return await super().next_turn()
        except asyncio.CancelledError:
            if self.task.cancelled():
                raise EnvError("the rollout was cancelled") from None
            raise
        except Exception as failure:
            hint = next((f"; {hint}" for needle, hint in HINTS.items() if needle in str(failure)), "")
            raise EnvError(f"the rollout failed: {type(failure).__name__}: {failure}{hint}") from failure


# -- messages --------------------------------------------------------------------------------------------

def jsonable(value: Any) -> Any:
    """Messages, rows and outputs hold pydantic models and numpy values: make them plain JSON types."""
    return orjson.loads(orjson.dumps(value, default=_plain, option=orjson.OPT_SERIALIZE_NUMPY))


def _plain(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    return dump(exclude_none=True) if callable(dump) else str(value)


def message_dicts(messages: list[Any]) -> list[dict[str, Any]]:
    return jsonable(list(messages))


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for part in content or ():
        if isinstance(part, dict):
            parts.append(part.get("text", "") if part.get("type") == "text" else f"[{part.get('type', 'part')}]")
    return "\n".join(parts)


def render_messages(messages: list[dict[str, Any]]) -> str:
    """Observation text: each message as "role: content", separated by blank lines."""
    return "\n\n".join(f"{m.get('role', 'user')}: {_text(m.get('content'))}" for m in messages)

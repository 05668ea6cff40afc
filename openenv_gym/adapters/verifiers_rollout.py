"""Step a Verifiers rollout from outside: the environment's own loop runs, and its model requests wait.

`env.run_rollout(row, client, ...)` runs as a task with a client whose every model request parks until
the session answers it. So the environment keeps its loop (setup, stop conditions in their order,
env_response, tools, timeouts, cleanup, scoring) and the session only supplies assistant messages:

    rollout = Rollout(env, client_class, row)
    turn = await rollout.next_turn()          # Turn(prompt=[...]) : the model is asked
    turn = await rollout.answer(message)      # ... or Turn(output={...}): the rollout ended, scored

Also here: actions to assistant messages, and messages to JSON and to observation text.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass
from typing import Any

import orjson

from openenv_gym.episode.toolcalls import normalize_tool_call, parse_tool_calls
from openenv_gym.errors import EnvError

MODEL = "policy"  # the model name the environment sees in its state
HINTS = {  # what to do about failures older environments meet on newer verifiers
    "Plain string task": "this environment's rows have a plain-string `task` column, which verifiers 0.1.14 and "
                         "later refuse: pin verifiers==0.1.12 in its pyproject and import it again with --force, "
                         "or drop or rename the column in load_environment()",
}
log = logging.getLogger(__name__)


def callback_client_class(vf: Any) -> type:
    """A vf.Client subclass whose model is an async callable, `CallbackClient(model)`: it gets the prompt
    messages and returns the assistant message {"content", "tool_calls": [{"id", "name", "arguments"}]}.
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
            reply = response_message(content=message["content"], tool_calls=calls, is_truncated=False,
                                     finish_reason="tool_calls" if calls else "stop")
            return response(id=f"step-{time.monotonic_ns()}", created=int(time.time()), model=MODEL, message=reply)

        async def close(self) -> None:
            return None

    return CallbackClient


@dataclass(slots=True)
class Turn:
    prompt: list[Any] | None = None  # the whole conversation the environment sends to the model
    output: dict[str, Any] | None = None  # the scored RolloutOutput, when the rollout ended instead

    @property
    def done(self) -> bool:
        return self.prompt is None


class Rollout:
    """One `env.run_rollout` task; its model requests become turns, answered one step at a time."""

    def __init__(self, env: Any, client_class: type, row: dict[str, Any]) -> None:
        loop = asyncio.get_running_loop()
        self._turn: asyncio.Future[Turn] = loop.create_future()
        self._reply: asyncio.Future[dict] | None = None
        self.task = loop.create_task(env.run_rollout(row, client_class(self.ask), MODEL, {}))
        self.task.add_done_callback(self._ended)

    async def ask(self, prompt: list[Any]) -> dict[str, Any]:
        """Called by the client, on the rollout's task: publish the request, wait for the answer."""
        self._reply = asyncio.get_running_loop().create_future()
        self._turn.set_result(Turn(prompt=prompt))
        return await self._reply

    def _ended(self, _: asyncio.Task) -> None:
        if not self._turn.done():
            self._turn.set_result(Turn())

    async def next_turn(self) -> Turn:
        turn = await self._turn
        if not turn.done:
            return turn
        if self.task.cancelled():
            raise EnvError("the rollout was cancelled")
        failure = self.task.exception()
        if failure is not None:
            hint = next((f"; {hint}" for needle, hint in HINTS.items() if needle in str(failure)), "")
            raise EnvError(f"the rollout failed: {type(failure).__name__}: {failure}{hint}") from failure
        return Turn(output=self.task.result())

    async def answer(self, message: dict[str, Any]) -> Turn:
        """Give the waiting model request its assistant message; return the next turn."""
        assert self._reply is not None, "answer() before a model request"
        self._turn = asyncio.get_running_loop().create_future()
        reply, self._reply = self._reply, None
        if self.task.done():  # it ended while the policy thought (its timeout_seconds ran out)
            self._turn.set_result(Turn())
        else:
            reply.set_result(message)
        return await self.next_turn()

    async def cancel(self) -> None:
        """End a rollout that is still running (its cleanup handlers run)."""
        if self.task.done():
            return
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            try:
                await self.task
            except Exception:  # a failing cleanup must not fail the close that ended the episode
                log.warning("a verifiers rollout failed while being cancelled", exc_info=True)


# -- actions and messages --------------------------------------------------------------------------

def assistant_message(action: Any, tool_names: set[str], turn: int) -> dict[str, Any] | str:
    """The assistant message an action is ({content, tool_calls}), or a message saying why it is none.

    Text is the message's content; for environments with tools, the tool calls written in the text (any
    format toolcalls reads) are made, all of them, in order. An object is {"content", "tool_calls":
    [OpenAI-style calls]}, or one tool call {"name", "arguments"}.
    """
    if isinstance(action, str):  # every call the text writes, in order, as verifiers plays them all
        calls = parse_tool_calls(action) if tool_names else []
        return {"content": action, "tool_calls": [_tool_call(call, turn, index) for index, call in enumerate(calls)]}
    if not isinstance(action, dict):
        return 'an action is the assistant\'s text, or an object {"content": ..., "tool_calls": [...]}'
    if "content" in action or "tool_calls" in action:
        content, raw_calls = action.get("content"), action.get("tool_calls") or []
    else:
        content, raw_calls = None, [action]
    if content is not None and not isinstance(content, str):
        return "the message's content must be a string"
    if not isinstance(raw_calls, list):
        return "tool_calls must be a list of tool calls"
    calls = []
    for index, raw in enumerate(raw_calls):
        call = normalize_tool_call(raw)
        if call is None:
            return f'tool call {index} is neither {{"name", "arguments"}} nor an OpenAI tool call'
        calls.append(_tool_call(call, turn, index, raw.get("id")))
    return {"content": content, "tool_calls": calls}


def _tool_call(call: dict[str, Any], turn: int, index: int, call_id: Any = None) -> dict[str, str]:
    return {"id": str(call_id or f"call_{turn}_{index}"), "name": call["name"],
            "arguments": orjson.dumps(call["arguments"]).decode()}


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

"""ORS (Open Reward Standard) shapes, shared by the in-process adapter and the HTTP+SSE transport.

Works on plain dicts (ORS's JSON shapes), so neither SDK is needed to use it: blocks to observation
text, tool listings, tool outputs to steps, splits, and the X-Secrets header.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import orjson

from openenv_gym.episode.options import CATALOG_OPTIONS, vocabulary
from openenv_gym.episode.results import StepResult, invalid_action, reward_of
from openenv_gym.episode.tasks import TASK_SPEC
from openenv_gym.episode.toolcalls import ToolCall, find_tool_call
from openenv_gym.errors import BadRequestError
from openenv_gym.protocol.tool_specs import as_tool

SPLIT_TYPES = ("train", "validation", "test")
DEFAULT_MAX_STEPS = 100  # ORS environments declare no step limit; an episode is truncated after this many
# what an ORS episode's reset reads: the task (from the catalog, or a task spec of its own) and its secrets
RESET_OPTIONS = vocabulary(CATALOG_OPTIONS, (TASK_SPEC, "secrets"))


def render_blocks(blocks: Any) -> tuple[str, list[dict]]:
    """Observation text from ORS blocks; image blocks are kept aside (for info)."""
    texts, images = [], []
    for block in blocks or ():
        if block.get("type") == "text":
            texts.append(block["text"])
        elif block.get("type") == "image":
            images.append({"data": block["data"], "mimeType": block["mimeType"]})
            texts.append("[image]")
    return "\n".join(texts), images


@dataclass(frozen=True)
class ToolListing:
    """An environment's tools, and its terminal tool: plain text with no tool call in it is the final answer."""

    tools: list[dict]
    terminal: dict | None  # {"name", "arg"}

    @classmethod
    def from_wire(cls, listed: dict) -> ToolListing:
        """From a ListToolsOutput as JSON: {"tools": [ToolSpec, ...], "terminal_tool": {"name", "arg"} | null}."""
        terminal = listed.get("terminal_tool")
        return cls([as_tool(t) for t in listed["tools"]],
                   None if terminal is None else {"name": terminal["name"], "arg": terminal.get("arg")})

    def with_task_tools(self, task_tools: list[dict]) -> ToolListing:
        """This listing plus an episode's task tools (ORS ToolSpecs: what `list_task_tools()` or
        `/task_tools` lists); a task tool never takes the name of a listed or the terminal tool."""
        taken = {t["name"] for t in self.tools} | ({self.terminal["name"]} if self.terminal else set())
        extra = [as_tool(t) for t in task_tools if t["name"] not in taken]
        return ToolListing(self.tools + extra, self.terminal) if extra else self

    @cached_property  # asked at every step
    def names(self) -> set[str]:
        return {t["name"] for t in self.tools} | ({self.terminal["name"]} if self.terminal else set())

    def call_of(self, action: Any) -> ToolCall | str:
        """The tool call an action makes, or why there is none. Text holding no tool call goes to the terminal
        tool when there is one, as ORS harnesses route a final answer."""
        call = find_tool_call(action, self.names)
        if isinstance(call, str) and isinstance(action, str) and self.terminal is not None:
            arg = self.terminal["arg"]
            return {"name": self.terminal["name"], "arguments": {arg: action} if arg else {}}
        return call


def split_entry(split: Any) -> dict[str, str]:
    if isinstance(split, str):
        return {"name": split, "type": split if split in SPLIT_TYPES else "validation"}
    if isinstance(split, dict):
        return {"name": split["name"], "type": split.get("type", "validation")}
    return {"name": split.name, "type": str(getattr(split.type, "value", split.type))}


def step_from_tool_result(ran: dict) -> StepResult:
    """A RunToolOutput ({ok, output} or {ok: false, error, reason}) as a step: `finished` ends the episode; a
    refused call is an invalid-action observation and the episode goes on."""
    if not ran.get("ok"):
        result = invalid_action(str(ran.get("error", "the tool call failed")))
        result.info["reason"] = ran.get("reason")
        return result
    output = ran["output"]
    obs, images = render_blocks(output.get("blocks"))
    info: dict[str, Any] = {"metadata": output.get("metadata")}
    if images:
        info["images"] = images
    reward = reward_of(output.get("reward"), info)
    return StepResult(obs, reward, bool(output.get("finished")), False, info)


def secrets_of(options: dict[str, Any]) -> dict[str, str]:
    """The per-episode secrets a reset passes in its options ({} when none)."""
    secrets = options.get("secrets") or {}
    if not isinstance(secrets, dict) or not all(isinstance(v, str) for v in secrets.values()):
        raise BadRequestError("option secrets must be an object of string values")
    return secrets


def secrets_header(secrets: dict[str, str]) -> str:
    """The X-Secrets header value carrying per-episode secrets."""
    payload = {name: {"value": value, "allowed_domains": []} for name, value in secrets.items()}
    return base64.b64encode(orjson.dumps(payload)).decode()

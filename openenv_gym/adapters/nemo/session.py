"""Serve NeMo Gym resource servers (manifest kind "nemo") in process: thousands of sessions per worker, one cookie
jar each, no process and no port per session (app.py).

reset:  a dataset row (options task: an index or the row's id; split: the dataset's name, `example` where the
        import found only that; index; or a seeded choice). The row is sent whole, as NeMo's agents send it, to
        /seed_session ("resources" protocol) or /reset ("gymnasium"). Observation: the last message of the row's
        input (or /reset's observation); info["messages"]: the row's input in chat completions' shape (the
        Responses request it holds, read as the model endpoint reads one); info["tools"]: its tools and those a
        server exposes over MCP where its seed says so (in the one shape: protocol/tool_specs.py).
step:   the policy's reply (text, tool calls, or both). "resources": each tool call is a POST /{name} of its
        arguments, whose answer's text is the observation, as NeMo's simple_agent gives it to the model (an error
        status's body too); a reply without a call (or the step limit) ends the episode: the whole episode's output
        items (its messages, calls and their outputs) as a Responses object go to /verify with the row, and its
        reward is the episode's, every other number it returns in info["metrics"]; its reasoning goes as NeMo's model
        servers write it. A server whose agent simulates the tools' results verifies the one reply as it is, its calls
        not made (and seeds no session). "gymnasium": the reply is the
        `response` of a POST /step, whose observation, reward, terminated and truncated are the step's (the tool
        outputs in its info are the observation, as gymnasium_agent reads them).
close:  /close_session where the server keeps sessions it can close, /close where a gymnasium reset said so.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import httpx
import orjson

from openenv_gym.adapters.environment import Environment
from openenv_gym.adapters.long_text import read_action
from openenv_gym.adapters.nemo.app import ServerApp, answered, post
from openenv_gym.episode.assistant import ASSISTANT_MESSAGES, assistant_message, conversation_message
from openenv_gym.episode.options import CATALOG_OPTIONS, vocabulary
from openenv_gym.episode.results import ResetResult, StepResult, invalid_action
from openenv_gym.episode.tasks import choose_task, reveals_hidden, splits_with_counts
from openenv_gym.errors import EnvError
from openenv_gym.manifests.schema import NEMO_ROW_INPUT as INPUT
from openenv_gym.manifests.schema import NemoManifest
from openenv_gym.protocol.openai_chat import ChatRequestError, tool_names
from openenv_gym.protocol.openai_responses import output_items, response_object, responses_request

SHOWN_FIELDS = ("id",)  # of a row, besides its input; the rest (expected answers) only with expose_answer
MODEL = "policy"


class Dataset:
    """A split's rows, read as lines once and parsed when played."""

    def __init__(self, path: Path) -> None:
        self.lines = [line for line in path.read_bytes().splitlines() if line.strip()]
        self._ids: dict[str, int] | None = None

    def row(self, index: int) -> dict[str, Any]:
        row = orjson.loads(self.lines[index])
        if not isinstance(row, dict) or not isinstance(row.get(INPUT), dict):
            raise EnvError(f"row {index} of the dataset has no {INPUT} object")
        return row

    def find(self, name: str) -> int | None:
        if self._ids is None:
            self._ids = {}
            for index in range(len(self.lines)):
                value = orjson.loads(self.lines[index]).get("id")
                if isinstance(value, str | int) and not isinstance(value, bool):
                    self._ids.setdefault(str(value), index)
        return self._ids.get(name)


class NemoFactory:
    def __init__(self, manifest: NemoManifest) -> None:
        self.manifest = manifest
        self.name = manifest.name
        self.datasets = {split: Dataset(manifest.folder / path) for split, path in manifest.splits.items()}
        self.server = ServerApp(manifest)

    def __call__(self) -> NemoSession:
        return NemoSession(self)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.manifest.description, "action": "tools", "tools": [],
                "max_steps": None, "source": "nemo", "protocol": self.manifest.protocol,
                "reset_options": vocabulary(CATALOG_OPTIONS), ASSISTANT_MESSAGES: True}

    async def splits(self) -> list[dict[str, str]]:
        return [{"name": split, "type": split} for split in self.datasets]

    async def num_tasks(self, split: str) -> int:
        return len(self.datasets[split].lines)

    async def catalog(self) -> list[dict[str, Any]]:
        return await splits_with_counts(self)

    async def tasks(self, split: str, window: range, reveal: bool) -> list[dict]:
        dataset = self.datasets[split]
        return [task_info(dataset.row(index), index, reveal) for index in window if index < len(dataset.lines)]

    async def find_task(self, split: str, name: str) -> int | None:
        return self.datasets[split].find(name)

    async def aclose(self) -> None:
        await self.server.aclose()


def task_info(row: dict[str, Any], index: int, reveal: bool) -> dict[str, Any]:
    """What a task shows: its index and id, and with `reveal` its other fields (the expected answers)."""
    return {"index": index, **{key: value for key, value in row.items()
                               if key != INPUT and (key in SHOWN_FIELDS or reveal)}}


class NemoSession(Environment):
    def __init__(self, factory: NemoFactory) -> None:
        self.factory = factory
        self.server = factory.server
        self.client: httpx.AsyncClient | None = None
        self.row: dict[str, Any] = {}
        self.request: Any = None  # the row's input read as a ChatRequest (its body: the Responses request)
        self.messages: list[dict[str, Any]] = []
        self.tools: set[str] = set()
        self.output: list[dict[str, Any]] = []  # the episode's output items, as NeMo's agents collect them
        self.turns = 0
        self.episode_id = ""
        self.explicit_close = False

    async def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> ResetResult:
        options = options or {}
        factory, manifest = self.factory, self.factory.manifest
        chosen = await choose_task(factory, factory.name, seed, options)
        self.server.refuse_unmet()
        row = factory.datasets[chosen["split"]].row(chosen["index"])
        try:
            request = responses_request(row[INPUT])
        except ChatRequestError as exc:
            raise EnvError(f"the row's {INPUT} is not a Responses request: {exc}") from None
        await self.close()
        await self.server.start()
        self.client, self.row, self.request = self.server.client(), row, request
        self.messages, self.output, self.turns, self.episode_id = list(request.messages), [], 0, uuid.uuid4().hex
        if manifest.protocol == "gymnasium":
            reset = answered(await post(self.client, "/reset", row), "/reset")
            self.explicit_close = (reset.get("info") or {}).get("supports_explicit_close") is True
            if reset.get("observation"):
                self.messages.append({"role": "user", "content": reset["observation"]})
            tools = request.tools
        else:
            tools = await self._seed(row, request.tools)
        self.tools = tool_names(tools)
        info = {**chosen, "task": chosen["index"], "messages": self.messages, "tools": tools,
                "task_data": task_info(row, chosen["index"], reveals_hidden(options))}
        return ResetResult(self.messages[-1]["content"] or "", info)

    async def _seed(self, row: dict[str, Any], tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The episode's session seeded with the row, as NeMo's agents seed it (not where its agent only verifies
        the one reply); its tools: the row's, and those the server lists over MCP where its seed says so (the rows
        of such a server offer none)."""
        if self.factory.manifest.simulated_tools:
            return tools
        assert self.client is not None
        seeded = answered(await post(self.client, "/seed_session", row), "/seed_session")
        if not (isinstance(seeded, dict) and seeded.get("mcp")):
            return tools
        named = tool_names(tools)
        return tools + [tool for tool in self.server.mcp_tools_for(row) if tool["function"]["name"] not in named]

    async def step(self, action: Any) -> StepResult:
        assert self.client is not None, "the server steps only sessions that were reset"
        self.turns += 1
        message = await read_action(assistant_message, action, self.tools, self.turns)
        if isinstance(message, str):
            return invalid_action(message)
        items = output_items(message, f"{self.episode_id}_{self.turns}")
        self.output += items
        self.messages.append(conversation_message(message))
        if self.factory.manifest.protocol == "gymnasium":
            return await self._gymnasium_step(message, items)
        if self.factory.manifest.simulated_tools:  # the one reply, verified as it is, its calls not made
            return await self._verify(message, truncated=False)
        outputs = [await self._call(call) for call in message["tool_calls"]]
        limit = self.turns >= self.factory.manifest.max_steps
        if not outputs or limit:
            return await self._verify(message, truncated=bool(outputs))
        return StepResult("\n\n".join(outputs), info={"messages": self.messages})

    async def _call(self, call: dict[str, str]) -> str:
        """A tool call answered by the server's route of its name: the answer's text, whatever its status. A name the
        row does not offer never reaches the server (its /verify and /seed_session are routes too)."""
        assert self.client is not None
        if call["name"] in self.tools:
            text = (await post(self.client, f"/{call['name']}", orjson.loads(call["arguments"]))).text
        else:
            text = orjson.dumps({"error": f"no tool is named {call['name'][:100]!r}; the tools: "
                                          f"{', '.join(sorted(self.tools)) or 'none'}"}).decode()
        self.output.append({"type": "function_call_output", "call_id": call["id"], "output": text})
        self.messages.append({"role": "tool", "tool_call_id": call["id"], "content": text})
        return text

    def _response(self, message: dict[str, Any], output: list[dict[str, Any]]) -> dict[str, Any]:
        body = self.request.body
        response = response_object(message, str(body.get("model") or MODEL), f"resp_{self.episode_id}", self.request)
        return response | {"output": output}

    async def _verify(self, message: dict[str, Any], truncated: bool) -> StepResult:
        assert self.client is not None
        response = self._response(message, self.output)
        verdict = answered(await post(self.client, "/verify", self.row | {"response": response}), "/verify")
        reward = verdict.get("reward")
        if not isinstance(reward, int | float) or isinstance(reward, bool):
            raise EnvError(f"/verify answered without a numeric reward: {str(verdict)[:500]}")
        sent = self.row.keys() | {"response"}
        metrics = {key: value for key, value in verdict.items()
                   if key not in sent and key != "reward" and isinstance(value, int | float)
                   and not isinstance(value, bool)}
        info = {"metrics": metrics, "messages": self.messages, "response": response}
        return StepResult("The episode is over; it was verified.", float(reward), terminated=not truncated,
                          truncated=truncated, info=info)

    async def _gymnasium_step(self, message: dict[str, Any], items: list[dict[str, Any]]) -> StepResult:
        assert self.client is not None
        answer = await post(self.client, "/step", self.row | {"response": self._response(message, items)})
        if 400 <= answer.status_code < 500:  # the server could not read the reply (no action in it): the policy's
            del self.messages[-1], self.output[len(self.output) - len(items):]  # (not a turn of the episode)
            return invalid_action(f"the environment refused the reply (HTTP {answer.status_code}): "
                                  f"{answer.text[:1000]}")
        step = answered(answer, "/step")
        info = step.get("info") if isinstance(step.get("info"), dict) else {}
        said = []
        for output in info.get("tool_outputs") or []:
            self.output.append({"type": "function_call_output", "call_id": output["call_id"],
                                "output": output["output"]})
            self.messages.append({"role": "tool", "tool_call_id": output["call_id"], "content": output["output"]})
            said.append(str(output["output"]))
        if step.get("observation"):
            self.messages.append({"role": "user", "content": step["observation"]})
            said.append(str(step["observation"]))
        truncated = bool(step.get("truncated")) or (self.turns >= self.factory.manifest.max_steps
                                                    and not step.get("terminated"))
        return StepResult("\n\n".join(said), float(step.get("reward") or 0.0), bool(step.get("terminated")),
                          truncated, info={"messages": self.messages, "env_info": info})

    async def close(self) -> None:
        client, self.client = self.client, None
        if client is None:
            return
        try:
            if self.factory.manifest.protocol == "gymnasium" and self.explicit_close:
                await client.post("/close", json={})
            elif self.server.has("/close_session") and self.server.overrides("close_resources_session"):
                await client.post("/close_session", json={"resources_session_id": self.episode_id,
                                                          "episode_id": {"rollout_id": self.episode_id}})
        except httpx.HTTPError:
            pass  # the episode is over either way; the server's own state is its to keep
        finally:
            await client.aclose()


def load_nemo_environment(manifest: NemoManifest) -> NemoFactory:
    return NemoFactory(manifest)

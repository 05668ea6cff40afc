"""Any program that calls a model, as an environment (manifest kind "agent"): one program run per episode.

A reset starts the episode's program with the model endpoint's address of its own (OPENAI_BASE_URL,
OPENAI_API_KEY, OPENAI_MODEL, and Anthropic's and Gemini's: adapters/endpoint.py) and waits for its first model
request, in any of the endpoint's APIs: that request is the observation (the last message's text; the messages,
tools and dialect in info). Each step answers the waiting request with the action (text,
or an assistant message with tool calls) and waits for the next one, or for the program's end, which ends the
episode (terminated) with its reward: the manifest's reward function of the trace, else what the program
printed last, as JSON (a number, or an object with "reward" and metrics). The ATIF trajectory a program may leave
at $OPENENV_TRAJECTORY (agent/trajectory.json in its working directory) gives its model calls' token counts in that
info (episode/atif.py), for the training export to reconcile. A program that crashes ends its
episode with the error in info; one that stays silent longer than its turn timeout is killed and its episode
truncated. Each episode's program runs in a sandbox of its own (workplace.py: its own files, processes and uid,
no network but its model endpoint unless the manifest's `network` says otherwise): nothing it does reaches
another session or the server.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import json
import os
import posixpath
import signal
import sys
from dataclasses import dataclass
from typing import Any

from openenv_gym.adapters.agent.catalog import TaskFiles, prompt_of, visible
from openenv_gym.adapters.endpoint import EndpointLease, ModelEndpoint, client_environ
from openenv_gym.adapters.environment import Environment
from openenv_gym.adapters.long_text import read_action
from openenv_gym.adapters.policy_turns import PolicyTurns, Turn
from openenv_gym.adapters.python import import_entry
from openenv_gym.adapters.workplace import Workplace
from openenv_gym.episode import atif
from openenv_gym.episode.assistant import ASSISTANT_MESSAGES, assistant_message
from openenv_gym.episode.options import CATALOG_OPTIONS, vocabulary
from openenv_gym.episode.results import ResetResult, StepResult, invalid_action, reward_of
from openenv_gym.episode.tasks import TASK_SPEC, choose_task, reveals_hidden, splits_with_counts
from openenv_gym.episode.turn_graph import TurnGraph
from openenv_gym.errors import BadRequestError, EnvError, SandboxUnavailableError
from openenv_gym.manifests.schema import AgentManifest, ManifestError, sandbox_policy
from openenv_gym.manifests.venvs import npm_commands
from openenv_gym.programs import STDIN, Program, ProgramSpec, inherited_environ, warm_up
from openenv_gym.programs.environ import expand
from openenv_gym.protocol.openai_chat import ChatRequest, tool_names
from openenv_gym.sandbox import refusal

ERROR_TAIL = 2000  # characters of a failed program's stderr told in info


@dataclass(slots=True)
class Ended:
    """How an episode's program ended."""

    exit_code: int
    stdout: str
    stderr: str

    def result(self) -> Any:
        """What it printed last, as JSON (None if its last line is not JSON)."""
        lines = [line for line in self.stdout.splitlines() if line.strip()]
        if not lines:
            return None
        try:
            return json.loads(lines[-1])
        except ValueError:
            return None


class AgentFactory:
    def __init__(self, manifest: AgentManifest, endpoint: ModelEndpoint | None, sandboxed: bool) -> None:
        self.manifest, self.endpoint, self.name, self.sandboxed = manifest, endpoint, manifest.name, sandboxed
        self.policy = sandbox_policy(manifest.network, manifest.limits, manifest.folder)
        self.catalog_files = TaskFiles(manifest)
        self.reward_function = _reward_function(manifest) if manifest.reward else None
        warm_up(manifest.preload)

    def __call__(self) -> AgentSession:
        if self.endpoint is None:
            raise EnvError("agent environments run under `openenv-gym serve`, which gives them the model endpoint")
        return AgentSession(self, self.endpoint)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.manifest.description or "an agent program stepped one model "
                "request at a time", "action": "text", "tools": [], "max_steps": None, "source": "agent",
                "reset_options": vocabulary(CATALOG_OPTIONS, (TASK_SPEC,)), ASSISTANT_MESSAGES: True}

    async def workplace(self) -> Workplace:
        """Where an episode's program runs: its sandbox (or, served --no-sandbox, a temporary folder)."""
        return await Workplace.open(self.policy, self.sandboxed, f"openenv-gym-{self.name}-")

    async def splits(self) -> list[dict[str, str]]:
        return await self.catalog_files.splits()

    async def num_tasks(self, split: str) -> int:
        return await self.catalog_files.num_tasks(split)

    async def catalog(self) -> list[dict[str, Any]]:
        return await splits_with_counts(self)

    async def tasks(self, split: str, window: range, reveal: bool) -> list[dict]:
        chosen = [self.catalog_files.task(split, index) for index in window]
        return chosen if reveal else [visible(task) for task in chosen]

    def spec(self, place: Workplace, lease: EndpointLease, task: dict[str, Any]) -> ProgramSpec:
        manifest, limits = self.manifest, self.manifest.limits
        environ = inherited_environ()
        environ.update(client_environ(lease), OPENENV_TASK=json.dumps(visible(task)), OPENENV_PROMPT=prompt_of(task),
                       OPENENV_PROMPT_JSON=json.dumps(prompt_of(task)),
                       OPENENV_TRAJECTORY=posixpath.join(place.workdir, atif.TRAJECTORY))
        commands = npm_commands()
        if commands is not None:  # (its npm packages' commands: a CLI agent's)
            environ["PATH"] = f"{commands}:{environ.get('PATH', os.defpath)}"
        environ = place.environ(environ) | {"PWD": place.workdir}
        environ.update({name: expand(value, environ, f"environ.{name}") for name, value in manifest.environ.items()})
        common = dict(workdir=place.workdir, environ=environ, cpu_seconds=limits.cpu_seconds,
                      memory_bytes=limits.memory_mb * 2**20, output_bytes=limits.output_mb * 2**20,
                      open_files=limits.open_files, sandbox=place.entry,
                      processes=limits.processes if place.entry is not None else None)
        prompt = prompt_of(task)
        if manifest.command is None:
            return ProgramSpec(**common, folder=str(manifest.folder), name=manifest.name, entry=manifest.entry, call={
                "prompt": prompt, "task": visible(task), "base_url": lease.base_url, "api_key": lease.api_key,
                "model": lease.model})
        # it runs in its working directory: the files it names are the env folder's
        command = [str(manifest.folder / part) if (manifest.folder / part).is_file() else expand(part, environ,
                                                                                                   "command")
                   for part in manifest.command]
        script = command[0] in ("python", "python3") and len(command) > 1 and command[1].endswith(".py")
        if command[0] in ("python", "python3"):  # the env's own interpreter, in its venv
            command[0] = sys.executable
        if manifest.task_input == "argv":
            command.append(prompt)
        else:
            (place.host_workdir / STDIN).write_text(prompt)
        return ProgramSpec(**common, command=command, script=script)


class AgentSession(Environment):
    def __init__(self, factory: AgentFactory, endpoint: ModelEndpoint) -> None:
        self.factory, self.endpoint = factory, endpoint
        self.turns: PolicyTurns | None = None
        self.lease: EndpointLease | None = None
        self.program: Program | None = None
        self.place: Workplace | None = None
        self.trace: dict[str, Any] = {}
        self.graph = TurnGraph()  # which request goes on from which (a retry, a sub-agent, a compaction: not)
        self.tool_names: set[str] = set()  # of the waiting request

    async def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> ResetResult:
        options = options or {}
        if TASK_SPEC not in options and not self.factory.catalog_files.tasks:
            raise BadRequestError(f"{self.factory.name} has no tasks file: give the task in the reset, "
                                  "options={'task_spec': {'prompt': ...}}")
        chosen = await choose_task(self.factory, self.factory.name, seed, options)
        task = chosen.get(TASK_SPEC) or self.factory.catalog_files.task(chosen["split"], chosen["index"])
        await self.close()
        self.place = await self.factory.workplace()
        self.trace, self.graph = {"task": task, "turns": []}, TurnGraph()
        self.turns = PolicyTurns(lambda ask: self._run(ask, task))
        turn = await self._next(self.turns.next_turn())
        if turn.done:
            ended: Ended = turn.output
            raise EnvError(f"the program ended (exit code {ended.exit_code}) before asking the model anything"
                           f"{_said(ended)}{self._endpoint_errors()}")
        info = {**{k: v for k, v in chosen.items() if k != TASK_SPEC}, **self._request_info(turn.request)}
        if reveals_hidden(options):
            info["task"] = task
        return ResetResult(turn.request.last_text, info)

    async def _run(self, ask: Any, task: dict[str, Any]) -> Ended:
        """The episode's program, from start to end, with its own address on the endpoint."""
        place = self.place
        assert place is not None
        self.lease = lease = await self.endpoint.open(ask, self.factory.manifest.model, place.listener())
        try:
            self.program = program = await Program.start(self.factory.spec(place, lease, task), place.host_workdir)
            try:
                code = await program.wait()
            finally:
                program.kill()
            return Ended(code, *program.output())
        finally:
            lease.close()

    async def _next(self, waiting: Any) -> Turn:
        """The next turn; a program silent past its turn timeout is killed (its turn then says so)."""
        assert self.turns is not None
        try:  # (wait_for, not asyncio.timeout: a step may run inline in the connection's task, eager.py)
            return await asyncio.wait_for(waiting, self.factory.manifest.limits.turn_timeout)
        except TimeoutError:
            if self.program is not None:
                self.program.kill()
            self.trace["timed_out"] = True
            return await self.turns.next_turn()

    def _request_info(self, request: ChatRequest) -> dict[str, Any]:
        node = self.graph.add(request.messages)
        turn = {key: node[key] for key in ("turn", "parent", "branch", "kind")}
        # (its messages past its parent's prompt and reply: the rest is the parent's, up the graph)
        self.trace["turns"].append({**turn, "messages": request.messages[node["from"]:], "tools": request.tools})
        self.tool_names = tool_names(request.tools)
        return request.info() | {"turn": turn}

    async def step(self, action: Any) -> StepResult:
        assert self.turns is not None, "the server steps only sessions that were reset"
        message = await read_action(assistant_message, action, self.tool_names, len(self.trace["turns"]))
        if isinstance(message, str):
            return invalid_action(message)
        self.trace["turns"][-1]["reply"] = message
        self.graph.answer(message)
        turn = await self._next(self.turns.answer(message))
        if turn.done:
            return await self._final(turn.output)
        return StepResult(turn.request.last_text, info=self._request_info(turn.request))

    async def _final(self, ended: Ended) -> StepResult:
        timed_out = bool(self.trace.get("timed_out"))
        result = ended.result()
        self.trace.update(exit_code=ended.exit_code, result=result, stdout=ended.stdout, stderr=ended.stderr)
        info: dict[str, Any] = {"exit_code": ended.exit_code, "result": result}
        if timed_out:
            info["error"] = {"code": "timeout", "message": f"the program was silent for more than "
                             f"{self.factory.manifest.limits.turn_timeout:g} s and was killed"}
        elif ended.exit_code != 0:
            bound = " (the memory bound of its sandbox killed it)" if self.place and self.place.out_of_memory() else ""
            info["error"] = {"code": "env_error",
                             "message": f"the program {_ending(ended.exit_code)}{bound}{_said(ended)}"}
        if self.lease is not None and self.lease.errors:
            info["endpoint_errors"] = list(self.lease.errors)
        calls = await self._model_calls()
        if calls is not None:
            info[atif.INFO_KEY] = calls
        value, metrics = await self._reward(result, info)
        if metrics:
            info["metrics"] = metrics
        reward = reward_of(value, info)
        obs = f"The episode is over (exit code {ended.exit_code}); reward {reward:g}."
        return StepResult(obs, reward, terminated=not timed_out, truncated=timed_out, info=info)

    async def _model_calls(self) -> dict[str, Any] | None:
        """The model calls of the ATIF trajectory the program left, if it left one (episode/atif.py)."""
        if self.place is None:
            return None
        try:
            text = await self.place.read(atif.TRAJECTORY, atif.MAX_BYTES)
        except FileNotFoundError:
            return None
        except OSError as exc:
            return {"error": f"{atif.TRAJECTORY} could not be read: {exc.strerror or exc}"}
        return atif.model_calls(text)

    async def _reward(self, result: Any, info: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        """(the reward, the metrics): the reward function's, else the program's last JSON line's."""
        function = self.factory.reward_function
        if function is not None:
            try:  # a plain function may take its time (running the tests of what the program wrote): in a thread
                value = await (function(self.trace) if inspect.iscoroutinefunction(function)
                               else asyncio.to_thread(function, self.trace))
            except Exception as exc:
                info["error"] = {"code": "env_error", "message": f"the reward function {self.factory.manifest.reward} "
                                 f"raised {type(exc).__name__}: {exc}"}
                return 0.0, {}
            result = value
        if isinstance(result, dict):
            return result.get("reward"), {k: v for k, v in result.items() if k != "reward"}
        return (result if isinstance(result, int | float) and not isinstance(result, bool) else None), {}

    def _endpoint_errors(self) -> str:
        errors = self.lease.errors if self.lease is not None else []
        return f"; the endpoint refused: {'; '.join(errors)}" if errors else ""

    async def close(self) -> None:
        turns, self.turns = self.turns, None
        if self.program is not None:
            self.program.kill()
        if turns is not None:
            await turns.cancel()
        self.program = self.lease = None
        place, self.place = self.place, None
        if place is not None:
            await place.close()


def _ending(code: int) -> str:
    """How a program ended, in words: its exit code, or the signal that killed it (exit code -N)."""
    if code >= 0:
        return f"exited with code {code}"
    try:
        return f"was killed by {signal.Signals(-code).name} (exit code {code})"
    except ValueError:
        return f"was killed by signal {-code} (exit code {code})"


def _said(ended: Ended) -> str:
    tail = ended.stderr.strip()[-ERROR_TAIL:]
    return f"; its stderr ends with:\n{tail}" if tail else ""


def _reward_function(manifest: AgentManifest) -> Any:
    assert manifest.reward is not None
    module, _, name = manifest.reward.partition(":")
    if module.startswith("openenv_gym."):  # one of ours (adapters/agent/rewards.py), not the env folder's
        function = getattr(importlib.import_module(module), name, None)
    else:
        function = import_entry(manifest.model_copy(update={"entry": manifest.reward}))
    if not callable(function):
        raise ManifestError(f"{manifest.folder}: reward {manifest.reward!r} is not a function of the trace")
    return function


def load_agent_environment(manifest: AgentManifest, endpoint: ModelEndpoint | None = None,
                           sandboxed: bool = True) -> AgentFactory:
    refused = refusal(f"{manifest.name}, an agent environment,") if sandboxed else None
    if refused is not None:
        raise SandboxUnavailableError(refused)
    if manifest.entry is not None:
        import_entry(manifest)  # fails now, with the file, rather than in every episode's program
    return AgentFactory(manifest, endpoint, sandboxed)


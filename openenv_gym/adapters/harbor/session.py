"""Serve Harbor task packages (manifest kind "harbor"): each episode is one trial of a task in a sandbox of its own
(trial.py), played through two tools.

reset:  the task (options task = its index, id or name; or split and index; or a seeded choice), its sandbox
        staged as Harbor's container would be. Observation: instruction.md (a multi-step task's first step's);
        info: the tools, the task's id, its workdir. Option oracle=True plays Harbor's oracle first (solution/
        solve.sh, as the agent: only then is /solution there), so that a submit scores the reference solution.
step:   bash(command, timeout): its output (the end of it, bounded) and exit code; a plain string is a command.
        submit(): the verifier scores the trial, as Harbor's does; its reward and every metric of reward.json in
        info. The agent timeout or the step limit ends the episode the same way, truncated.
        A multi-step task goes on to its next step while the step's reward reaches its min_reward; the episode's
        reward is then the steps' mean (or the last one's: multi_step_reward_strategy = "final").
close:  the trial's processes killed, its files gone (its sandbox renewed for another episode).
"""

from __future__ import annotations

import asyncio
import functools
import json
from typing import Any

from openenv_gym.adapters.endpoint import ModelEndpoint
from openenv_gym.adapters.environment import Environment
from openenv_gym.adapters.harbor.container_trial import ContainerTrial
from openenv_gym.adapters.harbor.placement import container_bounds, containers_instead, exported_images, sandbox_policy
from openenv_gym.adapters.harbor.trial import Trial
from openenv_gym.adapters.long_text import read_action
from openenv_gym.adapters.policy_turns import PolicyTurns, Turn
from openenv_gym.adapters.workplace import Workplace
from openenv_gym.episode.assistant import assistant_message
from openenv_gym.episode.options import CATALOG_OPTIONS, vocabulary
from openenv_gym.episode.results import ResetResult, StepResult, invalid_action
from openenv_gym.episode.tasks import TASK_SPEC, choose_task, splits_with_counts
from openenv_gym.episode.toolcalls import find_tool_call
from openenv_gym.errors import BadRequestError, EnvError
from openenv_gym.manifests.harbor import variables_missing
from openenv_gym.manifests.schema import HarborManifest, ManifestError
from openenv_gym.programs import Program, warm_up
from openenv_gym.protocol.openai_chat import ChatRequest, tool_names
from openenv_gym.sandbox import unavailable
from openenv_gym.sandbox.containers import remove_orphans
from openenv_gym.sandbox.engines import Engine

OPTIONS = ("oracle", "harness")
HARNESSES = ("client", "bash")
BASH = {"name": "bash", "description": "Run a bash command in the task's environment, from its working directory; "
        "returns its output and exit code.",
        "inputSchema": {"type": "object", "properties": {
            "command": {"type": "string"},
            "timeout": {"type": "number", "description": "seconds before it is killed (default 120)"}},
            "required": ["command"]}}
SUBMIT = {"name": "submit", "description": "Say the task is done: it is then verified.",
          "inputSchema": {"type": "object", "properties": {}}}
DEFAULT_TIMEOUT = 120.0
HARNESS_ENTRY = "harness:run"  # the built-in agent program (harness.py, in this folder)


class HarborFactory:
    def __init__(self, manifest: HarborManifest, endpoint: ModelEndpoint | None = None, sandboxed: bool = True,
                 containers: Engine | None = None) -> None:
        """`containers`: the engine each trial runs in a container of (where no sandbox can be made)."""
        self.manifest, self.endpoint, self.sandboxed, self.containers = manifest, endpoint, sandboxed, containers
        self.index: list[dict[str, Any]] = json.loads((manifest.vendored / "index.json").read_text())
        self.splits_found = list(dict.fromkeys(task["split"] for task in self.index))
        self.by_split = {split: [task for task in self.index if task["split"] == split] for split in self.splits_found}
        self.images = exported_images(manifest, self.index) if sandboxed and containers is None else {}
        self.policies = {(task["key"], harness): sandbox_policy(manifest, task, harness != "client", self.images)
                         for task in self.index for harness in HARNESSES} if containers is None else {}
        if containers is not None:
            remove_orphans(containers)
        warm_up(["http.client", "json", "subprocess", "urllib.parse"])  # (what the agent program imports)
        for task in self.index:
            missing = variables_missing(task)
            if missing is not None:
                raise ManifestError(f"{manifest.name}, task {task['id']}: {missing}")

    async def open_trial(self, task: dict[str, Any], harness: str = "client", side: dict[str, Any] | None = None) \
            -> Trial:
        """A trial of `task` in its sandbox (in its container, where no sandbox can be made): the task's own, or a
        separate verifier's, given its `side`."""
        if self.containers is not None:
            if harness != "client":
                raise EnvError(f"{self.manifest.name}: the agent program of ours (harness {harness}) runs in a "
                               f"sandbox, which this machine cannot make ({unavailable()}); its trials run in "
                               f"containers of {self.containers.name}'s: play them from the client (harness client)")
            bounds = container_bounds(self.manifest, side or task)
            return await ContainerTrial.open(self.manifest, task, self.containers, bounds, side)
        policy = sandbox_policy(self.manifest, side, False, self.images) if side else \
            self.policies[task["key"], harness]
        return Trial(self.manifest, task, await Workplace.open(policy, True), side, self.images)

    def __call__(self) -> HarborSession:
        return HarborSession(self)

    def describe(self) -> dict[str, Any]:
        return {"name": self.manifest.name, "description": self.manifest.description, "action": "tools",
                "tools": [BASH, SUBMIT], "max_steps": None, "source": "harbor",
                "reset_options": vocabulary(CATALOG_OPTIONS, OPTIONS)}

    async def splits(self) -> list[dict[str, str]]:
        return [{"name": split, "type": split} for split in self.splits_found]

    async def num_tasks(self, split: str) -> int:
        return len(self.by_split.get(split, []))

    async def catalog(self) -> list[dict[str, Any]]:
        return await splits_with_counts(self)

    async def tasks(self, split: str, window: range, reveal: bool) -> list[dict]:
        tasks = self.by_split.get(split, [])
        return [{"index": i, "id": tasks[i]["id"], "name": tasks[i]["name"],
                 "steps": [step["name"] for step in tasks[i]["steps"]]} for i in window if i < len(tasks)]


class HarborSession(Environment):
    def __init__(self, factory: HarborFactory) -> None:
        self.factory, self.manifest = factory, factory.manifest
        self.trial: Trial | None = None
        self.task: dict[str, Any] = {}
        self.step_index = 0  # of a multi-step task's steps
        self.step_rewards: list[float] = []
        self.tool_calls = 0  # in this step
        self.oracle = False
        self.harness = "client"  # or the agent program inside the trial that plays it (harness.py)
        self.turns: PolicyTurns | None = None
        self.program: Program | None = None
        self.tool_names: set[str] = set()  # of the agent program's waiting model request
        self.program_turns = 0  # answered (its tool calls' ids are numbered by it)

    # -- reset --------------------------------------------------------------------------------------

    async def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> ResetResult:
        options = dict(options or {})
        self.oracle = options.pop("oracle", False)
        if not isinstance(self.oracle, bool):
            raise BadRequestError("option oracle is true or false")
        self.harness = options.pop("harness", self.manifest.harness)
        if self.harness not in HARNESSES:
            raise BadRequestError(f"option harness is one of {', '.join(HARNESSES)}: who plays the task")
        if self.harness != "client" and self.factory.endpoint is None:
            raise EnvError("an agent program plays Harbor tasks under `openenv-gym serve`, which gives it the model "
                           "endpoint")
        if not self.factory.sandboxed:
            raise EnvError(f"{self.manifest.name}: Harbor tasks run in a sandbox each (their /app, /logs and /tests "
                           "are the sandbox's own): serve it without --no-sandbox")
        chosen = await choose_task(self.factory, self.manifest.name, seed, options)
        if TASK_SPEC in chosen:
            raise BadRequestError("a Harbor environment plays its own tasks: name one with task, or split and index")
        self.task = self.factory.by_split[chosen["split"]][chosen["index"]]
        await self._end_trial()
        self.trial = await self.factory.open_trial(self.task, self.harness)
        self.step_index, self.step_rewards = 0, []
        try:
            await self.trial.start()
            instruction = await self._start_step()
            info = {"task": self.task["id"], "workdir": self.task["workdir"], "tools": [BASH, SUBMIT]}
            if self.harness != "client":
                turn = await self._harness_turn(instruction)
                if turn.done:
                    raise EnvError(f"the agent program ended before asking the model anything: {turn.output}")
                info |= self._request_info(turn.request)
                instruction = turn.request.last_text
        except BaseException:
            await self._end_trial()
            raise
        if self.task["steps"]:
            info["step"] = self.task["steps"][0]["name"]
        return ResetResult(instruction, info)

    # -- the agent program inside the trial (harness "bash") -----------------------------------------

    async def _harness_turn(self, instruction: str) -> Turn:
        """Start the agent program on `instruction` (a step's); its first model request, or its end."""
        await self._stop_program()
        self.turns = PolicyTurns(lambda ask: self._run_program(ask, instruction))
        return await self._next(self.turns.next_turn())

    async def _run_program(self, ask: Any, instruction: str) -> str:
        assert self.trial is not None and self.factory.endpoint is not None
        lease = await self.factory.endpoint.open(ask, "policy", self.trial.place.listener())
        try:
            spec = self.trial.program(HARNESS_ENTRY, {
                "prompt": instruction, "base_url": lease.base_url, "api_key": lease.api_key, "model": lease.model,
                "workdir": self.task["workdir"], "max_turns": self.manifest.harness_turns,
                "command_timeout": self.manifest.command_timeout})
            self.program = program = await Program.start(spec, self.trial.sandbox.host_path("/tmp"))
            try:
                code = await program.wait()
            finally:
                program.kill()
            stdout, stderr = program.output()
            return f"exit code {code}; {(stdout + stderr).strip()[-1000:]}" + (
                f"; the endpoint refused: {'; '.join(lease.errors)}" if lease.errors else "")
        finally:
            lease.close()

    async def _next(self, waiting: Any) -> Turn:
        """The program's next turn; one silent past the turn timeout is killed (its turn is then its end)."""
        assert self.turns is not None
        try:
            return await asyncio.wait_for(waiting, self.manifest.limits.turn_timeout)
        except TimeoutError:
            await self._stop_program()
            return Turn(output="killed: silent past the turn timeout")

    def _request_info(self, request: ChatRequest) -> dict[str, Any]:
        self.tool_names = tool_names(request.tools)
        return request.info()

    async def _program_step(self, action: Any) -> StepResult:
        assert self.turns is not None
        self.program_turns += 1
        message = await read_action(assistant_message, action, self.tool_names, self.program_turns)
        if isinstance(message, str):
            return invalid_action(message)
        turn = await self._next(self.turns.answer(message))
        if not turn.done:
            return StepResult(turn.request.last_text, info=self._request_info(turn.request))
        ended = await self._verify(truncated=False)
        ended.info["program"] = turn.output
        if ended.terminated or ended.truncated:
            return ended
        turn = await self._harness_turn(ended.obs)  # the next step's instruction, to a new run of the program
        if turn.done:
            raise EnvError(f"the agent program ended before asking the model anything: {turn.output}")
        return StepResult(turn.request.last_text, info=ended.info | self._request_info(turn.request))

    async def _stop_program(self) -> None:
        turns, self.turns = self.turns, None
        if self.program is not None:
            self.program.kill()
        if turns is not None:
            await turns.cancel()
        self.program = None

    async def _start_step(self) -> str:
        """The current step staged (a multi-step task's workdir files and its healthcheck, the oracle's solution
        when asked); its instruction."""
        assert self.trial is not None
        self.tool_calls = 0
        step = self._step_name()
        folder = self.trial.folder / "steps" / step if step else self.trial.folder
        if step:
            await self.trial.stage_step(step)
            check = self.task["steps"][self.step_index]["healthcheck"]
            if check:
                await self.trial.wait_healthy(check)
        if self.oracle:
            await self.trial.solve(step, self._phase("agent"))
        self.trial.start_agent_clock()
        return await asyncio.to_thread((folder / "instruction.md").read_text)

    def _step_name(self) -> str | None:
        steps = self.task["steps"]
        return steps[self.step_index]["name"] if steps else None

    def _phase(self, name: str) -> dict[str, Any]:
        steps = self.task["steps"]
        return steps[self.step_index][name] if steps else self.task[name]

    # -- steps --------------------------------------------------------------------------------------

    async def step(self, action: Any) -> StepResult:
        if self.trial is None:
            raise EnvError("reset first: there is no trial to step")
        if self.harness != "client":
            return await self._program_step(action)
        call = await read_action(find_tool_call, action, ["bash", "submit"]) if not isinstance(action, str) \
            or action.lstrip().startswith(("{", "<tool_call>")) else {"name": "bash", "arguments": {"command": action}}
        if isinstance(call, str):
            return invalid_action(call)
        if call["name"] == "submit":
            return await self._verify(truncated=False)
        return await self._bash(call["arguments"])

    async def _bash(self, arguments: dict[str, Any]) -> StepResult:
        """A command of the agent's, in the trial: its output's end and exit code; past the agent's timeout or the
        step limit, the step is verified (truncated)."""
        assert self.trial is not None
        command, asked = arguments.get("command"), arguments.get("timeout", DEFAULT_TIMEOUT)
        if not isinstance(command, str) or not command.strip():
            return invalid_action("bash needs a command: {\"command\": \"ls -la\"}")
        if not isinstance(asked, int | float) or isinstance(asked, bool) or asked <= 0:
            return invalid_action("bash's timeout is a number of seconds above 0")
        agent = self._phase("agent")
        left = self.trial.agent_time_left(agent["timeout"])
        timeout = max(min(float(asked), self.manifest.command_timeout, float("inf") if left is None else left), 0.001)
        ran = await self.trial.run(command, timeout, no_network=self.trial.offline(agent), user=agent["user"])
        self.tool_calls += 1
        output = ran.output[-self.manifest.output_chars:]
        observation = f"{output}{'' if not output or output.endswith(chr(10)) else chr(10)}[exit code {ran.exit_code}]"
        if ran.timed_out:
            observation += f" (killed after {timeout:g} s)"
        info = {"exit_code": ran.exit_code, "timed_out": ran.timed_out}
        left = self.trial.agent_time_left(agent["timeout"])
        if (left is not None and left <= 0) or self.tool_calls >= self.manifest.max_steps:
            ended = await self._verify(truncated=True)
            ended.info.update(info)
            return ended
        return StepResult(observation, 0.0, info=info)

    async def _verify(self, truncated: bool) -> StepResult:
        """The step verified; the episode's end, or the next step's instruction."""
        assert self.trial is not None
        step = self._step_name()
        verifier = self._phase("verifier")
        separate = functools.partial(self.factory.open_trial, self.task, "client") if "separate" in verifier else None
        metrics, output = await self.trial.verify(step, verifier, separate)
        reward = metrics.get("reward", next(iter(metrics.values())))
        info: dict[str, Any] = {"reward": reward, "metrics": metrics, "verifier_output": output[-2000:]}
        steps = self.task["steps"]
        if not steps:
            return StepResult(f"verified: reward {reward:g}", reward, not truncated, truncated, info)
        self.step_rewards.append(reward)
        info |= {"step": step, "step_rewards": list(self.step_rewards)}
        minimum = steps[self.step_index]["min_reward"]
        below = minimum is not None and (reward < minimum if not isinstance(minimum, dict) else
                                         any(metrics.get(key, 0.0) < value for key, value in minimum.items()))
        if below or truncated or self.step_index + 1 == len(steps):
            total = self.step_rewards[-1] if self.task["multi_step_reward_strategy"] == "final" else \
                sum(self.step_rewards) / len(steps)
            info["aborted"] = below and self.step_index + 1 < len(steps)
            return StepResult(f"verified: reward {total:g}", total, not truncated, truncated, info | {"reward": total})
        self.step_index += 1
        instruction = await self._start_step()
        info["next_step"] = self._step_name()
        return StepResult(instruction, 0.0, info=info)

    def extras(self) -> dict[str, Any]:
        return {"task": self.task.get("id"), "step": self._step_name()} if self.task else {}

    async def _end_trial(self) -> None:
        await self._stop_program()
        trial, self.trial = self.trial, None
        if trial is not None:
            await trial.close()

    async def close(self) -> None:
        await self._end_trial()


def load_harbor_environment(manifest: HarborManifest, endpoint: ModelEndpoint | None, sandboxed: bool) \
        -> HarborFactory:
    """The factory; where this machine cannot make sandboxes, its trials in containers (tasks imported into
    images), else refused. Loaded unsandboxed (the import's check of its files), it loads, and its resets are
    refused: a task's /app, /logs and /tests are its sandbox's own."""
    return HarborFactory(manifest, endpoint, sandboxed, containers_instead(manifest) if sandboxed else None)

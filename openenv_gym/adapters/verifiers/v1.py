"""Verifiers v1 environments (verifiers 0.4: Taskset, Task, Env, Harness), one episode per session, stepped one
model request at a time.

A reset starts the episode as Verifiers' own runner does (`env.run_episode(task, ctx)`: setup, the env's run with
its agents and their harness programs, finalize, scoring), with the model context pointed at this session's
address on the worker's model endpoint. Each request the harness program sends there is a step's observation
(the last message's text; the messages and tools in info, and which agent's trace asks: an episode may run
several), and the step's action answers it. When the episode ends, the step is terminal, its reward the first
trace's weighted reward as Verifiers computes it, with the rewards by name (and their weights), the metrics, the
stop condition, each trace's and any errors in info.

GRPO groups: the G episodes of one task are siblings, as the attempts of Verifiers' best-of-n env are; the
server's `score_group` judges them with that env's `finalize` (each member's `best`, and `pass_at_n` on all),
its reward the trace's own.

Tasks: one split, "train", of the taskset's tasks in order, read as resets ask for them (v1_tasks.py); a reset plays
`task` (an index, an id or a name), `split` + `index`, or a seeded choice; or `task_spec`, a task given whole, the
dump of the taskset's TaskData that Verifiers' env server is sent (validated into its own types). The config:
env_args that the Env's config declares are the Env's, the rest the taskset's (v1_config.py). What Verifiers would
run remotely runs here: every agent's runtime is the local subprocess one, and an agent that names no harness gets
the taskset's own, else the manifest's (`null` unless the import said otherwise).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from openenv_gym.adapters.endpoint import EndpointLease, ModelEndpoint
from openenv_gym.adapters.environment import Environment
from openenv_gym.adapters.long_text import read_action
from openenv_gym.adapters.policy_turns import PolicyTurns, Turn
from openenv_gym.adapters.vendored import load_vendored
from openenv_gym.adapters.verifiers.classic_rollout import jsonable
from openenv_gym.adapters.verifiers.runtime import install as install_runtime
from openenv_gym.adapters.verifiers.runtime import script_pythons
from openenv_gym.adapters.verifiers.v1_config import env_config
from openenv_gym.adapters.verifiers.v1_tasks import LazyTasks
from openenv_gym.episode.assistant import ASSISTANT_MESSAGES, REPLY_TAKEN, REWRITES_REPLIES, assistant_message
from openenv_gym.episode.groups import FinishedEpisode
from openenv_gym.episode.options import CATALOG_OPTIONS, vocabulary
from openenv_gym.episode.results import ResetResult, StepResult, invalid_action, reward_of
from openenv_gym.episode.tasks import TASK_SPEC, choose_task, reveals_hidden, splits_with_counts
from openenv_gym.errors import BadRequestError, EnvError, SandboxUnavailableError
from openenv_gym.manifests.schema import ManifestError, VerifiersManifest, sandbox_network
from openenv_gym.protocol.openai_chat import ChatRequest, tool_names
from openenv_gym.sandbox import SandboxPolicy, refusal

MODEL = "policy"  # the model the harness programs ask for
KEY_VARIABLE = "OPENENV_GYM_ENDPOINT_KEY"  # the model client's key (the session's address carries its own)
SPLIT = "train"  # v1 has no splits: every task is in this one
SHOWN_FIELDS = ("idx", "id", "name", "description", "prompt", "system_prompt")  # of TaskData


class V1Factory:
    """A v1 taskset's tasks, and sessions that step the model requests of their episodes; where an episode runs is
    the subclass's: here (LocalV1Factory), or on a v1 env server (remote.py)."""

    def __init__(self, taskset: Any, tasks: LazyTasks, manifest: VerifiersManifest, endpoint: ModelEndpoint | None,
                 vf: Any, env_args: dict[str, Any]) -> None:
        self.taskset, self.task_reader, self.manifest, self.endpoint, self.vf = taskset, tasks, manifest, endpoint, vf
        self.name = manifest.name
        self.env_args = env_args  # the manifest's, with those it is served with over them
        self.base_fields = set(vf.TaskData.model_fields)  # TaskData's own: a subclass's (the answer) show if asked

    async def run_episode(self, task: Any, base_url: str, on_trace: Callable[[Any], None]) -> Any:
        """The episode of `task`, its model at `base_url` (a session's address on the worker's model endpoint);
        `on_trace` sees each of its traces as it starts, where the episode runs here."""
        raise NotImplementedError

    async def serve(self) -> None:
        """Up what the episodes share, once for the worker's episodes."""

    async def aclose(self) -> None:
        pass

    def __call__(self) -> V1Session:
        if self.endpoint is None:
            raise EnvError("verifiers v1 environments run under `openenv-gym serve`, which gives them the model "
                           "endpoint")
        return V1Session(self, self.endpoint)

    def describe(self) -> dict[str, Any]:
        doc = self.manifest.description or (type(self.taskset).__doc__ or "").strip().split("\n")[0]
        return {"name": self.name, "description": doc, "action": "text", "tools": [], "max_steps": None,
                "source": "verifiers", "api": self.manifest.api, "class": type(self.taskset).__name__,
                "env_args": self.env_args, "endless": self.task_reader.endless,
                "reset_options": vocabulary(CATALOG_OPTIONS, (TASK_SPEC,)), ASSISTANT_MESSAGES: True,
                REWRITES_REPLIES: self.rewrites_replies()}

    def rewrites_replies(self) -> bool:
        """Whether its tasks intercept the model's replies (`@vf.intercept`), and so may take one as another."""
        return False

    async def splits(self) -> list[dict[str, str]]:
        return [{"name": SPLIT, "type": "train"}]

    async def num_tasks(self, split: str) -> int:
        return await self.task_reader.count()

    async def catalog(self) -> list[dict[str, Any]]:
        return await splits_with_counts(self)

    async def tasks(self, split: str, window: range, reveal: bool) -> list[dict]:
        return [self.task_info(task, reveal) for task in await self.task_reader.window(window)]

    def task_of(self, data: dict[str, Any]) -> Any:
        """A task given whole (the task_spec option: a dump of the taskset's TaskData, as Verifiers' env server is
        sent it), validated into the taskset's own types."""
        from pydantic import ValidationError

        task_class = type(self.taskset).task_type()
        try:
            parsed = task_class.data_type().model_validate(data)
        except ValidationError as exc:
            raise BadRequestError(f"option {TASK_SPEC} is no task of {self.name}: {exc}") from None
        return task_class(parsed, self.taskset.config.task)

    async def find_task(self, split: str, name: str) -> int | None:
        return await self.task_reader.find(name)

    def seeded_index(self, seed: int | None, count: int) -> int:
        return self.task_reader.seeded_index(seed, count)

    def task_info(self, task: Any, reveal: bool) -> dict[str, Any]:
        """What a task shows (its index, id, name and prompts); with `reveal`, its own fields too (its answer)."""
        data = jsonable(task.data)
        return {key: value for key, value in data.items()
                if key in SHOWN_FIELDS or (reveal and key not in self.base_fields)}


class LocalV1Factory(V1Factory):
    """The env itself, loaded here: its episodes run as Verifiers' own runner runs them."""

    def __init__(self, env: Any, tasks: LazyTasks, manifest: VerifiersManifest, endpoint: ModelEndpoint | None,
                 vf: Any, env_args: dict[str, Any]) -> None:
        super().__init__(env.taskset, tasks, manifest, endpoint, vf, env_args)
        self.env = env
        self.serving: Any = None
        self.starting = asyncio.Lock()

    def rewrites_replies(self) -> bool:
        from verifiers.v1.utils.decorators import discover_decorated

        return bool(self.task_reader.read and discover_decorated(self.task_reader.read[0], "intercept"))

    async def run_episode(self, task: Any, base_url: str, on_trace: Callable[[Any], None]) -> Any:
        context = self.vf.ModelContext(model=MODEL, client=self.vf.EvalClientConfig(base_url=base_url,
                                                                                    api_key_var=KEY_VARIABLE))
        return await self.env.run_episode(task, context, on_trace=on_trace)

    async def score_group(self, episodes: list[FinishedEpisode]) -> list[dict[str, Any]]:
        """The members' first traces judged together as best-of-n's finalize judges its attempts."""
        from verifiers.v1.envs.best_of_n import BestOfNEnv, BestOfNEnvConfig

        records = [episode.record for episode in episodes]
        if any(record is None or not record[1].traces for record in records):
            raise EnvError("a member's episode has no trace to compare (it failed before its agent ran)")
        task, first = records[0]
        siblings = self.vf.Episode(env=first.env, task=first.task, traces=[played.traces[0] for _, played in records])
        judge = SimpleNamespace(config=SimpleNamespace(threshold=BestOfNEnvConfig.model_fields["threshold"].default))
        await BestOfNEnv.finalize(judge, task, siblings)  # type: ignore[arg-type]
        return [{"reward": trace.reward, "metrics": jsonable(trace.metrics)} for trace in siblings.traces]

    async def serve(self) -> None:
        """Verifiers' serving resources (shared tool servers, interception), up once for the worker's episodes."""
        if self.serving is not None:
            return
        async with self.starting:  # held only once up: one that failed to start is tried again at the next reset
            if self.serving is None:
                serving = self.env.serving()
                await serving.__aenter__()
                self.serving = serving

    async def aclose(self) -> None:
        serving, self.serving = self.serving, None
        if serving is not None:
            await serving.__aexit__(None, None, None)


class V1Session(Environment):
    def __init__(self, factory: V1Factory, endpoint: ModelEndpoint) -> None:
        self.factory, self.endpoint = factory, endpoint
        self.turns: PolicyTurns | None = None
        self.lease: EndpointLease | None = None
        self.tool_names: set[str] = set()
        self.traces: dict[str, Any] = {}  # the episode's traces by id, each as its agent's run started
        self.asking: Any = None  # the trace whose model request waits for the step's answer
        self.replies = 0
        self.task: Any = None
        self.finished: tuple[Any, Any] | None = None  # (task, episode) of the episode that ended, for score_group

    async def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> ResetResult:
        options = options or {}
        factory = self.factory
        chosen = await choose_task(factory, factory.name, seed, options)
        task = self.task = factory.task_of(chosen[TASK_SPEC]) if TASK_SPEC in chosen else \
            await factory.task_reader.get(chosen["index"])
        await self.close()
        await factory.serve()
        self.replies, self.traces = 0, {}
        self.turns = PolicyTurns(lambda ask: self._run(ask, task))
        turn = await self.turns.next_turn()
        if turn.done:
            raise EnvError(f"the episode ended before asking the model anything: {_errors(turn.output) or 'no error'}"
                           f"{self._endpoint_errors()}")
        info = {**{key: value for key, value in chosen.items() if key != TASK_SPEC}, **self._request_info(turn.request)}
        if "index" in chosen:
            info["task"] = chosen["index"]
        info.update({"task_data": factory.task_info(task, reveals_hidden(options))})
        return ResetResult(turn.request.last_text, info)

    async def _run(self, ask: Any, task: Any) -> Any:
        self.lease = lease = await self.endpoint.open(ask, MODEL, any_model=True)  # (a seat may pin its model)
        try:
            return await self.factory.run_episode(task, lease.base_url, self._seated)
        finally:
            lease.close()

    def _seated(self, trace: Any) -> None:
        self.traces[trace.id] = trace

    def _request_info(self, request: ChatRequest) -> dict[str, Any]:
        """The request's info; which trace (agent run) of the episode asks, and the model it names if it is not
        the policy's (a seat pinned to a model of its own)."""
        self.tool_names = tool_names(request.tools)
        info = request.info()
        self.asking = trace = self.traces.get(request.trace)
        if request.trace:
            info["trace"] = {"id": request.trace, **_seat(trace)}
        if request.model and request.model != MODEL:
            info["model"] = request.model
        return info

    async def step(self, action: Any) -> StepResult:
        assert self.turns is not None, "the server steps only sessions that were reset"
        self.replies += 1
        message = await read_action(assistant_message, action, self.tool_names, self.replies)
        if isinstance(message, str):
            return invalid_action(message)
        asking = self.asking
        rewrites = len(asking.response_rewrites) if asking is not None else 0
        turn: Turn = await self.turns.answer(message)
        result = self._final(turn.output) if turn.done else \
            StepResult(turn.request.last_text, info=self._request_info(turn.request))
        if asking is not None and len(asking.response_rewrites) > rewrites:  # (a response intercept of its task's)
            result.info[REPLY_TAKEN] = asking.assistant_messages[-1].content or ""
        return result

    def episode_record(self) -> tuple[Any, Any] | None:
        finished, self.finished = self.finished, None
        return finished

    def _final(self, episode: Any) -> StepResult:
        self.finished = (self.task, episode)
        traces = list(episode.traces)
        info: dict[str, Any] = {"ok": bool(episode.ok)}
        value = None
        if traces:
            value = traces[0].reward
            info.update(_outcome(traces[0]), traces=[_outcome(trace) | _identity(trace) for trace in traces])
        errors = _errors(episode)
        if errors:  # (and the episode's own, as Verifiers recorded them: a front end raises them again)
            info["error"] = {"code": "env_error", "message": errors, "verifiers": [
                {"type": error.type, "message": error.message} for error in episode.errors]}
        if self.lease is not None and self.lease.errors:
            info["endpoint_errors"] = list(self.lease.errors)
        reward = reward_of(value, info)
        return StepResult(f"The episode is over ({info.get('stop_condition') or 'done'}); reward {reward:g}.",
                          reward, terminated=True, info=info)

    def _endpoint_errors(self) -> str:
        errors = self.lease.errors if self.lease is not None else []
        return f"; the endpoint refused: {'; '.join(errors)}" if errors else ""

    async def close(self) -> None:
        turns, self.turns = self.turns, None
        if turns is not None:
            await turns.cancel()
        self.lease = None


def _not_the_host_runtime_warning(record: logging.LogRecord) -> bool:
    return not str(record.msg).startswith("Harness %r is running in the subprocess runtime on the local system")


def _outcome(trace: Any) -> dict[str, Any]:
    """How a trace ended: its rewards by name (and their weights), metrics, stop condition and the facts its env
    recorded on it (its info)."""
    rewards = {name: reward for name, reward in trace.rewards.items() if reward is not None}
    return {"rewards": {name: reward.score for name, reward in rewards.items()},
            "reward_weights": {name: reward.weight for name, reward in rewards.items()},
            "metrics": jsonable(trace.metrics), "stop_condition": trace.stop_condition, "info": jsonable(trace.info)}


def _identity(trace: Any) -> dict[str, Any]:
    """Which trace it is: its id (the one its model requests named), its agent, its reward (None: unscored)."""
    return {"id": trace.id, "reward": trace.reward, **_seat(trace)}


def _seat(trace: Any) -> dict[str, Any]:
    """The agent a trace is the run of, and whether it trains (nothing where that is not known)."""
    agent = getattr(trace, "agent", None)
    return {"agent": agent.name, "trainable": agent.trainable} if agent is not None else {}


def _errors(episode: Any) -> str:
    found = [*episode.errors, *(error for trace in episode.traces for error in trace.errors)]
    return "; ".join(f"{getattr(e, 'type', 'error')}: {getattr(e, 'message', e)}" for e in found)


def importable_by_its_programs(manifest: VerifiersManifest) -> None:
    """Verifiers starts a package's tool servers as `python -m package.module`: the vendored package must be
    importable by this process's children (PYTHONPATH), under the name it is loaded as."""
    root = manifest.vendored
    if manifest.package:  # the vendored folder is the package itself: a link gives it its name
        links = Path(tempfile.mkdtemp(prefix="openenv-gym-packages-"))
        (links / manifest.package).symlink_to(root, target_is_directory=True)
        root = links
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))


def resource_server_reachable(env: Any, manifest: VerifiersManifest) -> None:
    """Verifiers' NeMo Gym env starts its taskset's resource server in a runtime of its own and reaches it by its port
    on this host, not through the runtime (`expose`): a sandbox with a network of its own keeps that port from it."""
    try:
        from verifiers.v1.tasksets.nemo_gym.taskset import NeMoGymEnv
    except ImportError:
        return
    if isinstance(env, NeMoGymEnv) and env.taskset.config.task.resources_url is None and manifest.network != "public":
        raise ManifestError(f"{manifest.name} is a NeMo Gym taskset whose env starts the resource server itself and "
                            "reaches it by its port on this host, which its sandbox's own network hides: give the "
                            "URL of a resource server you run, env_args {\"taskset\": {\"task\": {\"resources_url\": "
                            "\"http://HOST:PORT\"}}} (or import the server itself: docs/formats/nemo.md), or let its "
                            "programs share this host's network: network = \"public\" in "
                            f"{manifest.folder}/openenv.toml")


def load_v1_environment(manifest: VerifiersManifest, env_args: dict[str, Any],
                        endpoint: ModelEndpoint | None, sandboxed: bool = True) -> V1Factory:
    os.environ.setdefault("VF_LOG_LEVEL", "WARNING")
    os.environ.setdefault(KEY_VARIABLE, "in-the-address")
    # Verifiers starts `uv` for harness scripts that do not run warm: the one of this venv
    os.environ["PATH"] = f"{os.path.dirname(sys.executable)}{os.pathsep}{os.environ.get('PATH', '')}"
    refused = refusal(f"{manifest.name}, a Verifiers v1 environment,") if sandboxed else None
    if refused is not None:
        raise SandboxUnavailableError(refused)
    if sandboxed:  # its subprocess runtime runs in our sandboxes: Verifiers' warning that it runs on the host is not so
        logging.getLogger("verifiers.v1.env").addFilter(_not_the_host_runtime_warning)
    import verifiers.v1 as vf
    from verifiers.v1.runtimes.subprocess import SubprocessRuntime
    from verifiers.v1.utils.loaders import load_environment

    importable_by_its_programs(manifest)
    taskset_class = load_vendored(manifest)
    if not (isinstance(taskset_class, type) and issubclass(taskset_class, vf.Taskset)):
        raise ManifestError(f"{manifest.folder}: {manifest.entry} is not a verifiers v1 Taskset class")
    taskset_id = manifest.entry.split(":")[0].split(".")[0]  # its package, as Verifiers' loader imports it
    env_args = {**manifest.env_args, **env_args}
    env = load_environment(env_config(vf, taskset_id, env_args, manifest.harness))
    if sandboxed:
        resource_server_reachable(env, manifest)
    tasks = LazyTasks(env.taskset, manifest.max_tasks)
    tasks.read_to(1)  # the first task only: a taskset may be endless, and its tasks costly to make
    if not tasks.read:
        raise ManifestError(f"{manifest.name}: its taskset has no tasks")
    task_class = type(tasks.read[0])  # a task with tools overrides toolsets(): its servers start per rollout
    scripts = Path(SubprocessRuntime.scripts_dir)
    scripts.mkdir(parents=True, exist_ok=True)  # (shown to its sandboxes: it must be there when they are made)
    policy = SandboxPolicy(**sandbox_network(manifest.network), cpu_seconds=3600, file_bytes=256 << 20, open_files=4096,
                           readable=(str(manifest.folder), str(scripts), *script_pythons(),
                                     *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))))
    install_runtime(task_class.toolsets.__func__ is not vf.Task.toolsets.__func__, policy, sandboxed)
    return LocalV1Factory(env, tasks, manifest, endpoint, vf, env_args)

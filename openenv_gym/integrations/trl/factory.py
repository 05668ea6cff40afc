"""`environment_factory(env_id)`: an environment class for `GRPOTrainer(environment_factory=...)`.

    trainer = GRPOTrainer(model, reward_funcs=[], train_dataset=dataset(...),
                          environment_factory=environment_factory("openenv/guess"), ...)

Each instance is one session of the env's server; all instances of a thread share one multiplexed connection,
and a tool call is one request. The class has one public method per tool of the env (a free-text env gets
`send_message`), `reset(**row)` and `get_reward()`. The episode's end, and an env that fails, reach the model as
tool results. Sessions end when `trainer.train()` returns (a callback the class adds to the trainer) or when the
process exits; `close_sessions()` ends them at any time.

GRPO groups: TRL resets its instances in batch order, a group's rows one after the other. Where the env scores
groups itself (score_group, on the server), consecutive resets with the same row join one group, and
`get_reward()` is the member's group reward (asked of the server once per group, when its first member's reward
is asked for; None for a member that failed or did not end, which TRL leaves out).

A task sampler (`sampler=`, openenv_gym.sampling) chooses the task of each group instead of the rows (which then
only set the prompt: `dataset(size, sampled=True)`): consecutive resets with the same row, up to the sampler's
group size, are one group, and once every member's reward was asked for, the group's rewards go to `update`.
"""

from __future__ import annotations

import asyncio
import copyreg
import itertools
import json
from typing import Any, ClassVar

from openenv_gym.env import RemoteEnv
from openenv_gym.episode.groups import GROUP_OPTION, GroupScore
from openenv_gym.episode.state import cost_unit, env_seconds, seconds_asked
from openenv_gym.errors import EnvError, OpenEnvGymError
from openenv_gym.integrations.trl import lifecycle
from openenv_gym.integrations.trl.tasks import task_of_row
from openenv_gym.integrations.trl.tool_methods import tool_method
from openenv_gym.targets import Target, resolve

SEND_MESSAGE = {"name": "send_message", "description": "Send a message to the environment and get its reply.",
                "parameters": {"type": "object", "properties": {
                    "message": {"type": "string", "description": "the message, as the environment expects it"}},
                    "required": ["message"]}}


GROUP_NUMBERS = itertools.count()  # group ids, unique in this process (a server keeps groups per connection)


def _episode_over(env: OpenEnvGymEnv) -> str:
    how = f"failed ({env._error})" if env._error else "over"
    return f"The episode is {how}; its return is {env._return():g}. No more tool calls are needed."


class _Group:
    """Consecutive resets of one row: a GRPO group the server scores, or whose task a sampler chose."""

    __slots__ = ("id", "members", "rewards", "row", "score", "task")

    def __init__(self, row: str, task: dict[str, Any] | None) -> None:
        self.id = f"trl-{next(GROUP_NUMBERS)}"
        self.row = row
        self.members: list[OpenEnvGymEnv] = []
        self.score: GroupScore | Exception | None = None
        self.task = task  # the reset options the sampler gave the group (None: the row's task)
        # each member's reward as get_reward gave it, and its env's seconds (for the sampler)
        self.rewards: dict[int, tuple[float | None, float | None]] = {}


class EnvClass(type):
    """The type of the classes environment_factory makes. They are made at run time, so they pickle by recipe
    (the env id and the source of its servers), which TRL's AsyncGRPOTrainer needs for its spawned worker."""


def _pickled(cls: EnvClass) -> str | tuple:
    if "target" not in vars(cls):
        return cls.__qualname__  # the base class: by name, as usual
    target: Target = cls.target
    return _rebuilt, (target.env_id, target.settings() | {"async_reward": cls.async_reward, "sampler": cls.sampler})


def _rebuilt(env_id: str, settings: dict[str, Any]) -> EnvClass:
    return environment_factory(env_id, **settings)


copyreg.pickle(EnvClass, _pickled)


class OpenEnvGymEnv(metaclass=EnvClass):
    """An episode of one env session, as TRL's environment_factory uses it. Subclassed per env id. Every public
    function of the class is a tool for TRL, so the state is kept in underscored attributes."""

    target: ClassVar[Target]
    tool_names: ClassVar[list[str]] = []
    group_scoring: ClassVar[bool] = False  # the env scores groups: its rewards are its groups'
    async_reward: ClassVar[bool] = False  # get_reward is a coroutine function (see environment_factory)
    sampler: ClassVar[Any] = None  # the task sampler that chooses each group's task (see environment_factory)
    _open_group: ClassVar[_Group | None] = None  # the group the last reset joined

    def __init__(self) -> None:
        self._env: RemoteEnv | None = None
        self._rewards: list[float] = []
        self._done = True
        self._error: str | None = None
        self._info: dict[str, Any] = {}
        self._ended = False  # the env ended the episode (terminated or truncated)
        self._group: _Group | None = None
        lifecycle.track(self)
        lifecycle.attach_to_caller()

    def reset(self, **row: Any) -> str:
        """Start an episode; the row's columns choose the task (see task_of_row). Returns the first observation."""
        lifecycle.attach_to_caller()
        seed, options = task_of_row(row)
        if self._env is None:
            self._env = RemoteEnv(target=self.target)
        self._rewards, self._error, self._ended = [], None, False
        self._group = None
        if self.group_scoring or self.sampler is not None:
            group, member = self._join_group(row)
            if group.task is not None:
                seed, options = None, group.task
            if self.group_scoring:
                options = options | {GROUP_OPTION: {"id": group.id, "member": member}}
        obs, self._info = self._env.reset(seed=seed, options=options)
        self._done = False
        return obs

    @property
    def steps(self) -> int:
        """Env steps of the current (or last) episode."""
        return len(self._rewards)

    def get_reward(self) -> float | None:
        """The episode's return: the sum of its step rewards; where the env scores groups, its group reward (None
        for a member that failed or did not end)."""
        reward = self._group_reward() if self.group_scoring and self._group is not None else self._return()
        self._report(reward)
        return reward

    def _group_reward(self) -> float | None:
        group = self._group
        assert group is not None
        if group.score is None:
            ended = sum(member._ended for member in group.members)
            try:
                if not ended:
                    raise EnvError("no member of the group ended its episode")
                group.score = self._env.score_group(group.id, ended)  # type: ignore[union-attr]
            except OpenEnvGymError as exc:
                group.score = exc
        score = group.score
        scored = None if isinstance(score, Exception) or not self._ended else score.of(group.members.index(self))
        return None if scored is None else scored[0]

    def _return(self) -> float:
        return float(sum(self._rewards))

    def _report(self, reward: float | None) -> None:
        """A sampled group's rewards to the sampler, once every member's was asked for (a member that failed left
        out)."""
        group = self._group
        if self.sampler is None or group is None or group.task is None:
            return
        timed = cost_unit(self.sampler) == "seconds"
        failed = reward is None or self._error is not None
        group.rewards[group.members.index(self)] = (None, None) if failed else (
            reward, env_seconds(self._info) if timed else None)
        if len(group.rewards) == len(group.members):
            kept = [(r, seconds) for r, seconds in group.rewards.values() if r is not None]
            task, group.task = group.task, None  # (given back once)
            if kept:
                self.sampler.update(task, [r for r, _ in kept], [s for _, s in kept] if timed else None)

    async def _get_reward_async(self) -> float | None:
        """get_reward, awaited on the trainer's loop: a group score is asked for in a thread, since the session's
        calls run on a loop of their own."""
        if not self.group_scoring or self._group is None:
            return OpenEnvGymEnv.get_reward(self)
        return await asyncio.to_thread(OpenEnvGymEnv.get_reward, self)

    def _join_group(self, row: dict[str, Any]) -> tuple[_Group, int]:
        """This reset's group and member: the group of the reset before it, if that played the same row, this
        instance is not in it yet (a new batch) and it is not full (a sampler's group size), else a new group."""
        cls = type(self)
        key = json.dumps(row, sort_keys=True, default=str)
        group = cls._open_group
        full = self.sampler is not None and group is not None and len(group.members) >= self.sampler.group_size
        if group is None or group.row != key or self in group.members or group.score is not None or full:
            group = cls._open_group = _Group(key, None if self.sampler is None else self.sampler.sample(1)[0])
        self._group = group
        group.members.append(self)
        return group, len(group.members) - 1

    def _call(self, name: str, arguments: dict[str, Any]) -> str:
        return self._step({"name": name, "arguments": arguments})

    def _step(self, action: Any) -> str:
        if self._done or self._env is None:
            return _episode_over(self)
        try:
            obs, reward, terminated, truncated, self._info = self._env.step(action)
        except OpenEnvGymError as exc:  # the session is gone: tell the model, keep the trainer going
            self._done, self._error = True, f"{type(exc).__name__}: {exc}"
            return _episode_over(self)
        self._rewards.append(float(reward))
        if terminated or truncated:
            self._done = self._ended = True
            return f"{obs}\n\n{_episode_over(self)}"
        return obs

    def _close(self) -> None:
        """End the session on the server (a later reset opens a new one)."""
        env, self._env, self._done = self._env, None, True
        if env is not None:
            env.close()


def environment_factory(env_id: str, *, workers: int | None = None, async_reward: bool = False, sampler: Any = None,
                        **make_kwargs: Any) -> EnvClass:
    """A class for GRPOTrainer(environment_factory=...): one env session per instance, one method per tool.

    make_kwargs: what gym.make takes for `env_id` (base_url, token, options, env_args, ...). Without base_url, a
    local server is started now, with `workers` processes (default one per core). async_reward: `get_reward` is a
    coroutine function, which TRL awaits on its event loop (AsyncGRPOTrainer's rollout worker) instead of calling
    it in a thread of its pool. sampler: a task sampler (openenv_gym.sampling) that chooses each group's task
    (consecutive resets of one row, up to its group_size), given each group's rewards once they are all asked for.
    """
    if cost_unit(sampler) == "tokens":
        raise ValueError("environment_factory sees no tokens (TRL generates them): a sampler with cost='tokens' "
                         "works with make_rollout_func; here use 'episodes' or 'seconds'")
    if asked := seconds_asked(sampler):  # the server measures them when asked
        make_kwargs["options"] = (make_kwargs.get("options") or {}) | asked
    target = resolve(env_id, workers=workers, **make_kwargs)
    probe = RemoteEnv(target=target)
    description = probe.description
    probe.close()
    specs = (description.get("tools") or []) if description.get("action") == "tools" else [SEND_MESSAGE]
    taken = set(vars(OpenEnvGymEnv))
    namespace: dict[str, Any] = {"target": target, "__doc__": description.get("description") or None,
                                 "tool_names": [], "group_scoring": bool(description.get("group_scoring")),
                                 "async_reward": async_reward, "sampler": sampler}
    if async_reward:
        namespace["get_reward"] = OpenEnvGymEnv._get_reward_async
    for spec in specs:
        if spec is SEND_MESSAGE:
            name, method = tool_method(spec, lambda self, _name, arguments: self._step(arguments["message"]), taken)
        else:
            name, method = tool_method(spec, OpenEnvGymEnv._call, taken)
        namespace[name] = method
        namespace["tool_names"].append(name)
    class_name = "".join(part.capitalize() for part in str(description.get("name", "env")).replace("-", "_")
                         .split("_") if part) + "Env"
    return EnvClass(class_name, (OpenEnvGymEnv,), namespace)


def close_sessions() -> int:
    """End the sessions of every environment instance and rollout function of this process (the callback does
    this when training ends). Returns how many were closed."""
    return lifecycle.close_all()

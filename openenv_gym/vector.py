"""RemoteVectorEnv: a Gymnasium VectorEnv over N sessions of the async vector client (any transport).

    envs = gym.make_vec("openenv/echo", num_envs=1024)                     # embedded local server
    envs = gym.make_vec("openenv/echo", num_envs=1024, base_url=["ws://a:8000", "ws://b:8000"])

Not N processes: N sessions multiplexed over a few WebSocket connections, one batch frame per
connection per step. Observations are a tuple of str; rewards, terminations and truncations are
numpy arrays; infos are Gymnasium's dict of arrays with `_key` masks. Autoreset modes: NEXT_STEP
(default), SAME_STEP and DISABLED (reset finished envs with `reset(options={"reset_mask": mask})`).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium.utils.seeding import np_random
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from openenv_gym.client.results import VectorResult
from openenv_gym.client.retries import DEFAULT_RESET_RETRY_WINDOW
from openenv_gym.client.servers import Servers
from openenv_gym.client.sync import current_runner
from openenv_gym.client.transport import DEFAULT_REQUEST_TIMEOUT
from openenv_gym.env import SEED_BOUND
from openenv_gym.episode.groups import GROUP_OPTION
from openenv_gym.episode.state import MAX_STEPS_OPTION, cost_unit, env_seconds, seconds_asked
from openenv_gym.groups import Ended, Groups
from openenv_gym.spaces import spaces_for
from openenv_gym.targets import Target, with_make_args


def batch_infos(infos: Sequence[dict[str, Any]], envs: Sequence[int], num_envs: int) -> dict[str, Any]:
    """Gymnasium's dict-of-arrays infos (as VectorEnv._add_info builds them), a column at a time: the vector
    step's hot path, so columns of all envs in order (`envs` is range(num_envs)) are built without indexing."""
    keys = infos[0].keys() if infos else ()
    columns = _same_keys_columns(infos, keys, envs)
    if columns is None:
        columns = {}
        for env, info in zip(envs, infos, strict=True):
            for key, value in info.items():
                column = columns.setdefault(key, ([], []))
                column[0].append(env)  # type: ignore[union-attr]
                column[1].append(value)
    everyone = range(num_envs)
    batched: dict[str, Any] = {}
    for key, (column_envs, values) in columns.items():
        whole = column_envs == everyone
        index = slice(None) if whole else np.asarray(column_envs, dtype=np.intp)
        first = values[0]
        if type(first) is dict and all(type(v) is dict for v in values):
            array: Any = batch_infos(values, column_envs, num_envs)
        elif type(first) in (int, float, bool) or isinstance(first, np.number):
            array = np.zeros(num_envs, dtype=type(first))
            array[index] = values
        else:
            array = np.full(num_envs, None, dtype=object)
            array[index] = np.fromiter(values, dtype=object, count=len(values))
        mask = np.zeros(num_envs, dtype=np.bool_)
        mask[index] = True
        batched[key], batched[f"_{key}"] = array, mask
    return batched


def _same_keys_columns(infos: Sequence[dict[str, Any]], keys: Any, envs: Sequence[int]) -> dict | None:
    """The columns of infos that all have the same keys (the usual case), or None. Equal sizes and the first
    info's keys present in each mean equal key sets; checked that way, as comparing key views costs more."""
    if list(map(len, infos)).count(len(keys)) != len(infos):
        return None
    try:
        return {key: (envs, [info[key] for info in infos]) for key in keys}
    except KeyError:
        return None


def _truncate_failed(result: VectorResult) -> None:
    """An env whose reset failed reports truncated, as one whose step failed does: its episode is not running, and
    a training loop that stops at truncation starts it again (at the next step, with autoreset)."""
    if result.errors:
        result.truncated[list(result.errors)] = True


def _sampled(sampler: Any, group_size: int | None) -> tuple[int | None, dict[str, Any]]:
    """A sampler's group size (the one given must be the same), and the reset options its costs need."""
    if sampler is None:
        return group_size, {}
    if group_size is not None and group_size != sampler.group_size:
        raise ValueError(f"group_size {group_size} is not the sampler's ({sampler.group_size}): give one of them")
    if cost_unit(sampler) == "tokens":
        raise ValueError("the vector env sees no tokens: a sampler with cost='tokens' chooses tasks in rollouts() "
                         "and the trainers' paths, where the policy's turns give them; here use 'episodes' or "
                         "'seconds'")
    return sampler.group_size, seconds_asked(sampler)


def _check_reset_mask(mask: Any, num_envs: int) -> np.ndarray:
    if not isinstance(mask, np.ndarray):
        raise TypeError(f"options['reset_mask'] must be a numpy array, got {type(mask)}")
    if mask.shape != (num_envs,):
        raise ValueError(f"options['reset_mask'] must have shape ({num_envs},), got {mask.shape}")
    if mask.dtype != np.bool_:
        raise TypeError(f"options['reset_mask'] must have dtype np.bool_, got {mask.dtype}")
    if not mask.any():
        raise ValueError("options['reset_mask'] must have at least one True value")
    return mask


class RemoteVectorEnv(VectorEnv):
    metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP, "render_modes": ["ansi"], "render_fps": 1}

    def __init__(self, env: str | None = None, num_envs: int = 1, base_url: Servers | None = None, *,
                 token: str | None = None, options: dict[str, Any] | None = None,
                 autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP, render_mode: str | None = None,
                 max_episode_steps: int | None = None, connections_per_worker: int = 2,
                 request_timeout: float | None = DEFAULT_REQUEST_TIMEOUT, transport: str = "native",
                 env_args: dict[str, Any] | None = None, reset_retry_window: float = DEFAULT_RESET_RETRY_WINDOW,
                 group_size: int | None = None, sampler: Any = None, sandbox: bool = True,
                 target: Target | None = None, make_args: Sequence[str] = (), **env_kwargs: Any) -> None:
        """
        env: the environment (name or folder) for the embedded default; set by registration. With
            transport="ors", the environment's name on the ORS server(s).
        base_url: one server URL or a list of them (sessions are spread over all), `dns+ws://NAME:PORT` (every
            address of NAME: a Kubernetes headless Service), or an openenv_gym.ray handle; None starts a local
            server for `env` with one worker per core. Envs of a lost server move to live ones at their next reset.
        options: reset options used by every reset (those passed to reset() take precedence).
        max_episode_steps: truncate episodes after this many steps (at most: the env's own limit stays).
        transport: "native", or "ors" for ORS HTTP servers (gym id openenv/ors).
        env_args: verifiers environments: arguments of load_environment() (see RemoteEnv).
        reset_retry_window: seconds a reset that failed for its server (lost, full) is tried again on live ones.
            An autoreset that still fails reports truncated with info["error"] and is tried again at the next
            step: a lost server never raises from step(). Only reset() raises, when no server could take the env.
        group_size: G for GRPO groups: envs [kG, (k+1)G) play the same task together. The n-th episode of each
            of them has the same seed (and the same reset options), whenever each gets to it, and
            info["group"] names it ("k.n") at its reset and every step, for a trainer to gather the G results.
            Where the environment scores groups (score_group, on the server), the step at which a group's last
            member ends has, in that env's info, "group_rewards" and "group_infos": one entry per member, in env
            order (None for a member that failed), or "group_error" if the scoring failed.
        sampler: a task sampler (openenv_gym.sampling) that chooses the task of each group's episodes (envs are
            groups of its group_size, or of one); when a group's last member ends, its members' returns go to the
            sampler's update (those of members that failed left out).
        sandbox: False starts the local server with --no-sandbox, its programs unconfined (see RemoteEnv); only
            without base_url.
        target: env, base_url, token, options, transport, env_args, request_timeout, reset_retry_window and
            sandbox at once (targets.resolve's), instead of them.
        env_kwargs: what the environment takes as env_args, by name (see RemoteEnv).
        """
        env_args = with_make_args(env_args, make_args, env_kwargs)
        group_size, timing = _sampled(sampler, group_size)
        if group_size is not None and (group_size < 1 or num_envs % group_size):
            raise ValueError(f"group_size must be at least 1 and divide num_envs ({num_envs}), got {group_size}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode {render_mode!r} is not supported; use 'ansi' or None")
        self.target = target or Target.of(env, base_url, workers=os.cpu_count() or 1, transport=transport,
                                          token=token, options=options, env_args=env_args,
                                          request_timeout=request_timeout, reset_retry_window=reset_retry_window,
                                          sandbox=sandbox)
        self.autoreset_mode = AutoresetMode(autoreset_mode)
        self.metadata = {**self.metadata, "autoreset_mode": self.autoreset_mode}
        self.render_mode = render_mode
        self.num_envs = num_envs
        self.default_options = self.target.options | timing
        self.max_episode_steps = max_episode_steps
        self._runner = current_runner()
        self.client = self._runner.open_client(self.target.open_vector_client(num_envs, connections_per_worker,
                                                                      group_size or 1))
        self.single_env_max_steps: int | None = self.client.description.get("max_steps")
        self.single_observation_space, self.single_action_space = spaces_for(self.client.description)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self._obs: list[str] = [""] * num_envs
        self._autoreset = np.zeros(num_envs, dtype=np.bool_)
        self._env_rngs: list[np.random.Generator | None] = [None] * num_envs
        self._all_envs = range(num_envs)
        self.group_size = group_size
        self._sampler = sampler
        self._timed = cost_unit(sampler) == "seconds"
        draw = None if sampler is None else (lambda: sampler.sample(1)[0])
        self._groups = None if group_size is None else Groups(num_envs, group_size, draw)
        self._returns = np.zeros(num_envs)  # each env's episode's return so far (kept for sampled groups)
        self._server_scores = self._groups is not None and bool(self.client.description.get("group_scoring"))

    def _seeds(self, seed: int | Sequence[int | None] | None, envs: Sequence[int]) -> list[int]:
        """The server seed of each env's next episode (with groups: its group's, for that episode)."""
        if self._groups is None:
            return self._own_seeds(seed, envs)
        leaders = self._groups.leaders(envs)
        fresh = self._own_seeds(seed, leaders) if seed is not None else None
        return self._groups.seeds(envs, fresh, lambda leader: self._own_seeds(None, [leader])[0])

    def _own_seeds(self, seed: int | Sequence[int | None] | None, envs: Sequence[int]) -> list[int]:
        """The server seed of each env's next episode, from the env's own generator.

        Each env has its own generator, seeded like a single RemoteEnv's: envs reset with seed s
        behave exactly like RemoteEnvs reset with seeds s, s+1, ... (Gymnasium's convention), and
        every later episode's seed comes from that env's generator.
        """
        if seed is None:
            given: list[int | None] = [None] * len(envs)
        elif isinstance(seed, int | np.integer):
            given = [int(seed) + env for env in envs]
        elif len(seed) != self.num_envs:
            raise ValueError(f"a list of seeds needs one per env ({self.num_envs}), got {len(seed)}")
        else:
            given = [seed[env] for env in envs]
        seeds = []
        for env, env_seed in zip(envs, given, strict=True):
            if env_seed is not None:
                self._env_rngs[env] = np_random(env_seed)[0]
                seeds.append(int(env_seed))
                continue
            rng = self._env_rngs[env]
            if rng is None:
                rng = self._env_rngs[env] = np_random(int(self.np_random.integers(SEED_BOUND)))[0]
            seeds.append(int(rng.integers(SEED_BOUND)))
        return seeds

    def reset(self, *, seed: int | Sequence[int | None] | None = None,
              options: dict[str, Any] | None = None) -> tuple[tuple[str, ...], dict[str, Any]]:
        super().reset(seed=seed if isinstance(seed, int | np.integer) else None)
        options = dict(options or {})
        mask = options.pop("reset_mask", None)
        envs = list(range(self.num_envs)) if mask is None else np.flatnonzero(
            _check_reset_mask(mask, self.num_envs)).tolist()
        seeds = self._seeds(seed, envs)
        options = self._member_options(envs, self._reset_options(options))
        result = self._runner.run(self.client.reset(envs, seeds, options))
        if result.errors:
            env, error = next(iter(result.errors.items()))
            raise type(error)(f"reset of env {env} failed: {error}") from error
        self._absorb(result)
        self._autoreset[envs] = False
        self._returns[envs] = 0.0
        if self._groups is not None:
            self._groups.label(result.infos, envs)
        return tuple(self._obs), batch_infos(result.infos, envs, self.num_envs)

    def _reset_options(self, options: dict[str, Any] | None = None) -> dict[str, Any]:
        """The options of a reset: the defaults, the given ones, and max_episode_steps as the episode's step
        limit (the limit is the server's rule, so the env's own, lower one still holds)."""
        merged = self.default_options | (options or {})
        if self.max_episode_steps is not None:
            own = merged.get(MAX_STEPS_OPTION, self.single_env_max_steps)
            merged[MAX_STEPS_OPTION] = self.max_episode_steps if own is None else min(own, self.max_episode_steps)
        return merged

    def _member_options(self, envs: Sequence[int], options: dict[str, Any]) -> dict[str, Any] | list[dict[str, Any]]:
        """Reset options; one per env where a sampler chose the task of its group's episode (options given take
        precedence) or where the server scores groups (naming the env's group and member)."""
        groups = self._groups
        if groups is None or not (self._server_scores or self._sampler is not None):
            return options
        return [groups.task(env) | options | ({GROUP_OPTION: groups.option(env)} if self._server_scores else {})
                for env in envs]

    async def _end_groups(self, result: VectorResult, waiting: np.ndarray) -> None:
        """The group episodes whose last member ended at this step (an episode that failed, at its step or its
        reset, counts as ended, not kept): each to the sampler, with its members' returns; and where the server
        scores groups, their score, asked for and put in that member's info."""
        groups = self._groups
        assert groups is not None
        returns = self._returns
        returns += result.rewards  # (an env reset at this step took no step: its reward is 0)
        ended = sorted(set(np.flatnonzero((result.terminated | result.truncated) & ~waiting).tolist())
                       | set(result.errors))
        complete = []
        for env in ended:
            kept = env not in result.errors
            cost = env_seconds(result.infos[env]) if kept and self._timed else None
            done = groups.ended(env, kept, float(returns[env]), cost)
            if done is not None:
                complete.append((env, done))
        returns[ended] = 0.0
        if self._sampler is not None:
            for _, done in complete:
                self._update_sampler(done)
        if not self._server_scores or not complete:
            return
        scores = await asyncio.gather(*(self.client.score_group(self.client.place_of(done.leader), done.name,
                                                                 done.kept) for _, done in complete),
                                      return_exceptions=True)
        for (env, done), score in zip(complete, scores, strict=True):
            info = result.infos[env]
            if isinstance(score, BaseException):
                info["group_error"] = f"group {done.name}: {score}" if done.kept else \
                    f"group {done.name}: every member failed"
                continue
            scored = [score.of(member) or (None, None) for member in range(groups.size)]
            info["group_rewards"], info["group_infos"] = [s[0] for s in scored], [s[1] for s in scored]

    def _update_sampler(self, done: Ended) -> None:
        """A sampled group episode's returns to its sampler (its members that failed left out; costs in seconds
        where the sampler counts them so)."""
        if done.task is None or not done.returns:
            return
        self._sampler.update(done.task, done.returns, done.costs if self._timed else None)

    async def _step(self, actions: Sequence[Any]) -> tuple[VectorResult, dict[str, Any]]:
        client = self.client
        waiting = self._autoreset
        if waiting.any():
            # envs whose episode ended last step (or whose reset then failed) are reset now, their actions ignored
            resetting = np.flatnonzero(waiting).tolist()
            stepping = np.flatnonzero(~waiting).tolist()
            seeds = self._seeds(None, resetting)
            result = await client.step_and_reset([actions[i] for i in stepping], stepping, resetting, seeds,
                                                 self._member_options(resetting, self._reset_options()))
            _truncate_failed(result)
        else:
            result = await client.step(actions)
        if self._server_scores or self._sampler is not None:
            await self._end_groups(result, waiting)
        if self.autoreset_mode is not AutoresetMode.SAME_STEP:
            return result, {}
        done = np.flatnonzero((result.terminated | result.truncated) & ~waiting).tolist()
        if not done:
            return result, {}
        # SAME_STEP: reset finished envs now; their last observation and info go to final_obs/final_info
        mask = np.zeros(self.num_envs, dtype=np.bool_)
        mask[done] = True
        final_obs = np.full(self.num_envs, None, dtype=object)
        for env in done:
            final_obs[env] = result.obs[env]
        extra = {"final_obs": final_obs, "_final_obs": mask, "_final_info": mask.copy(),
                 "final_info": batch_infos([result.infos[i] for i in done], done, self.num_envs)}
        seeds = self._seeds(None, done)
        client.send_reset(done, seeds, self._member_options(done, self._reset_options()))
        restarted = await client.gather(done)  # a reset that failed is reported, and tried again at the next step
        for k, env in enumerate(done):
            result.obs[env], result.infos[env] = restarted.obs[k], restarted.infos[k]
        return result, extra

    def step(self, actions: Sequence[Any]) -> tuple[tuple[str, ...], np.ndarray, np.ndarray, np.ndarray, dict]:
        if len(actions) != self.num_envs:
            raise ValueError(f"step needs {self.num_envs} actions, got {len(actions)}")
        result, extra = self._runner.run(self._step(actions))
        self._obs = result.obs  # every env answered, in env order
        if self.autoreset_mode is not AutoresetMode.DISABLED:
            self._autoreset = ~self.client.live  # ended, failed, or not restarted: reset at the next step
        if self._groups is not None:
            self._groups.label(result.infos, self._all_envs)
        infos = batch_infos(result.infos, self._all_envs, self.num_envs) | extra
        return tuple(self._obs), result.rewards, result.terminated, result.truncated, infos

    def _absorb(self, result: VectorResult) -> None:
        for env, obs in zip(result.ids.tolist(), result.obs, strict=True):
            self._obs[env] = obs

    def render(self) -> tuple[str, ...] | None:
        return tuple(self._obs) if self.render_mode == "ansi" else None

    def close_extras(self, **kwargs: Any) -> None:
        self._runner.run(self.client.close())

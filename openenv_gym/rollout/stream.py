"""`rollouts()`: finished episodes as they finish, for torchforge-style `continuous_rollouts` loops.

    policy = OpenAIPolicy("http://127.0.0.1:8000/v1", "my-model")
    async with contextlib.aclosing(openenv_gym.rollouts("openenv/guess", policy, num_envs=256)) as stream:
        async for episode in stream:
            replay_buffer.add(episode)

`num_envs` sessions play at once. Each policy call runs on its own (at once until it first waits, then as a task)
and its action is sent as soon as it returns (the vector client's send/recv; the actions of calls that return in
one loop iteration go in one send), so a slow policy call or a slow env holds back only its own episode.
Every session is closed when the stream ends, is closed (aclose, or leaving `aclosing`), or is cancelled.
"""

from __future__ import annotations

import asyncio
import random
from collections import deque
from collections.abc import AsyncIterator, Collection, Iterable, Sequence
from functools import partial
from typing import Any

from openenv_gym.client.results import VectorResult
from openenv_gym.client.vector import AsyncVectorClient
from openenv_gym.episode.assistant import ASSISTANT_MESSAGES
from openenv_gym.episode.groups import GROUP_OPTION
from openenv_gym.episode.results import episode_failure
from openenv_gym.episode.state import MAX_STEPS_OPTION
from openenv_gym.errors import EnvError
from openenv_gym.rollout.export import EXPORTS, training_records
from openenv_gym.rollout.groups import Advantage, Group, GroupCollector
from openenv_gym.rollout.plan import Plan
from openenv_gym.rollout.records import Episode, TurnTokens
from openenv_gym.rollout.sampled import Gate, SampledPlan
from openenv_gym.rollout.turns import (
    Policy,
    Reply,
    action_of,
    as_reply,
    assistant_message,
    episode_tools,
    observation_message,
)
from openenv_gym.runtime.eager import EagerStarter
from openenv_gym.targets import resolve


class _Game:
    """One session's current episode."""

    __slots__ = ("episode", "reply", "tools")

    def __init__(self, episode: Episode) -> None:
        self.episode = episode
        self.reply: Reply | None = None  # the turn in flight
        self.tools: list[dict[str, Any]] = []  # as the policy gets them: the task's, from its reset


async def rollouts(env_id: str, policy: Policy, *, num_envs: int, episodes: int | None = None,
                   tasks: Iterable[dict[str, Any]] | None = None, seed: int | None = None,
                   max_turns: int | None = None, system_prompt: str | None = None, workers: int | None = None,
                   group_size: int | None = None, advantage: Advantage = "mean", replacements: int = 1,
                   skip: Collection[int] = (), sampler: Any = None, gates: Sequence[Gate] = (),
                   max_extra: int | None = None, record: str | None = None, **make_kwargs: Any) -> AsyncIterator[Any]:
    """Finished episodes of `env_id` played by `policy`, in the order they finish; with `group_size`, groups.

    num_envs: sessions playing at once.
    episodes: how many episodes (with group_size: groups) to play (default: without end, or until `tasks` run
        out).
    group_size: play each task (and seed) G times at once and yield `Group`s of its G episodes, each episode
        with its group id and advantage (groups.py); `advantage` is "mean", "mean_std" or a function of the
        group's returns; a failed member is played again up to `replacements` times per group, and a group
        still short of a good member comes with `complete=False`.
    tasks: reset options of successive episodes, e.g. `({"split": "test", "index": i} for i in range(100))`.
    seed: the first episode's seed; the next ones get seed + 1, seed + 2, ... (default: the server's choice).
    max_turns: truncate episodes after this many steps (the env's own, lower limit still holds).
    system_prompt: a system message put before each episode's first observation.
    skip: the numbers (0 for the first) of the plan's episodes, or groups, not to play: those a run that stopped
        played already (`openenv-gym rollout --resume`); `episodes` still counts them.
    sampler: a task sampler (openenv_gym.sampling) that chooses each group's task, instead of `tasks`; every
        finished group's rewards go back to its `update`. `gates` (ZeroSignalGate, RewardRangeGate) drop groups
        the trainer cannot use; each dropped one is replaced, up to `max_extra` in the run (default: `episodes`),
        then the run ends short (the sampler's metrics count both).
    record: "train": each episode comes with its training records (`episode.training`: the exact export,
        rollout/export.py), one per branch of its model turns, each for training or, with the reason, evaluation.
    make_kwargs: what gym.make takes for this id (base_url, token, options, env_args, ...).
    """
    if num_envs < 1:
        raise ValueError(f"num_envs must be at least 1, got {num_envs}")
    if record is not None and record not in EXPORTS:
        raise ValueError(f"record must be one of {', '.join(EXPORTS)}, got {record!r}")
    if (sampler is not None or gates) and (group_size is None or tasks is not None):
        raise ValueError("a sampler (and gates) chooses the task of each group: give group_size, and no tasks")
    groups = None if group_size is None else GroupCollector(group_size, advantage, replacements)
    target = resolve(env_id, workers=workers, **make_kwargs)
    options = dict(target.options)
    if max_turns is not None:
        options[MAX_STEPS_OPTION] = max_turns
    if sampler is not None:
        plan: Plan = SampledPlan(sampler, episodes, seed, options, gates,
                                 (episodes or 0) if max_extra is None else max_extra, skip)
    else:
        plan = Plan(episodes, tasks, seed, options, skip)
    driver = _Driver(await target.open_vector_client(num_envs), policy, plan, system_prompt, groups, record)
    try:
        async for finished in driver.run():
            yield finished
    finally:
        await driver.close()


Play = tuple[tuple[int | None, dict[str, Any]], str | None, int | None]  # (seed, options), group, member


class _Driver:
    def __init__(self, client: AsyncVectorClient, policy: Policy, plan: Plan, system_prompt: str | None,
                 groups: GroupCollector | None = None, record: str | None = None) -> None:
        self.client = client
        self.policy = policy
        self.plan = plan
        self.system_prompt = system_prompt
        self.groups = groups
        self.record = record
        # The server scores the groups (the env has score_group): a group's members play where its episodes are
        # kept (one connection), so each place has its own queue of group plays to start.
        self.server_scores = groups is not None and bool(client.description.get("group_scoring"))
        self.members: dict[Any, deque[Play]] = {}  # place -> group plays to start there
        self.places: dict[str, Any] = {}  # group id -> its place
        self.env_places: dict[int, Any] = {}  # env -> where it started its last play
        self.left_places: set[Any] = set()  # places an env moved away from (its server was lost)
        self.idle: set[int] = set()  # envs with nothing to play now
        self.games: dict[int, _Game] = {}
        self.thinking: set[asyncio.Task] = set()
        self.scoring: set[asyncio.Task] = set()
        self.finished: deque[Any] = deque()  # episodes (or groups) to yield
        # the env reads assistant messages (it plays a model conversation): the whole turn goes, its reasoning too
        self.messages = bool(client.description.get(ASSISTANT_MESSAGES))
        self.failed_resets = 0  # in a row: past a bound, the env cannot start episodes and the stream stops
        self.reset_bound = max(10, 3 * client.num_envs)
        self.eager = EagerStarter(asyncio.get_running_loop())  # policy calls run at once until they first wait

    async def run(self) -> AsyncIterator[Episode]:
        for env in range(self.client.num_envs):
            self._start(env)
        while self.games or self.finished or self.scoring:
            while self.finished:
                yield self.finished.popleft()
            if self.client.in_flight.any():
                self._absorb(await self.client.recv(min_results=1))
            elif self.thinking or self.scoring:
                await asyncio.wait(self.thinking | self.scoring, return_when=asyncio.FIRST_COMPLETED)

    def _place(self, env: int) -> Any:
        return self.client.place_of(env) if self.server_scores else None

    def _finish(self, episode: Episode) -> None:
        """An episode ended: yield it, or its group once the group is whole (playing a failed member again)."""
        if self.groups is None:
            self.finished.append(self._recorded(episode))
            return
        group, replay = self.groups.add(episode)
        if replay is not None:
            place = self.places.get(episode.group or "")
            self.members.setdefault(place, deque()).appendleft((replay, episode.group, episode.group_member))
            waiting = next((env for env in self.idle if self._place(env) == place), None)
            if waiting is not None:
                self._start(waiting)
        if group is None:
            return
        place = self.places.pop(group.id, None)
        if self.server_scores and any(e.error is None for e in group.episodes):
            task = asyncio.ensure_future(self._score(group, place))
            self.scoring.add(task)
            task.add_done_callback(self.scoring.discard)
        else:
            self._settled(self.groups.settle(group))

    def _settled(self, group: Group) -> None:
        """A whole group, scored: to the trainer, unless a sampler's gate drops it (its replacement may start on an
        env that had nothing left to play)."""
        if not isinstance(self.plan, SampledPlan) or self.plan.settle(group):
            for episode in group.episodes:
                self._recorded(episode)
            self.finished.append(group)
            return
        for env in list(self.idle):
            self._start(env)

    def _recorded(self, episode: Episode) -> Episode:
        """The episode, with its training records where they were asked for (its advantage known by now)."""
        if self.record is not None:
            episode.training = training_records(episode)
        return episode

    async def _score(self, group: Group, place: Any) -> None:
        """The server scores the group (the env's score_group); a failure marks every member."""
        assert self.groups is not None
        good = [e for e in group.episodes if e.error is None]
        try:
            score = await self.client.score_group(place, group.id, len(good))
            for episode in good:
                scored = score.of(episode.group_member or 0)
                if scored is None:
                    raise EnvError(f"the group's score leaves out member {episode.group_member}")
                episode.group_reward = scored[0]
                episode.info.update(scored[1])
        except Exception as exc:  # the env's group function (or the server) failed: this group only
            for episode in group.episodes:
                episode.error = episode.error or f"group score: {exc}"
                episode.info["error"] = {"code": str(getattr(exc, "code", "group_error")), "message": str(exc)}
        self._settled(self.groups.settle(group))

    def _next(self, env: int) -> Play | None:
        """The env's next episode: a play of a group begun there, else the plan's next task (G plays of it)."""
        if self.groups is None:
            planned = self.plan.next()
            return None if planned is None else (planned, None, None)
        place = self._place(env)
        if self.env_places.setdefault(env, place) != place:  # the env moved: its old place may have no env left
            self.left_places.add(self.env_places[env])
            self.env_places[env] = place
        if self.left_places:
            self._give_up_deserted()
        queue = self.members.setdefault(place, deque())
        if not queue:
            planned = self.plan.next()
            if planned is None:
                return None
            if planned[0] is None:  # the server would pick each member's task apart: one seed for the group
                planned = (random.getrandbits(31), planned[1])
            group = f"g{self.plan.count - 1}"
            self.groups.begin(group, planned)
            self.places[group] = place
            queue.extend((planned, group, member) for member in range(self.groups.size))
        return queue.popleft()

    def _give_up_deserted(self) -> None:
        """The group plays queued at a place no env sits on any more (its server was lost) cannot be played
        there: each ends as failed, so its group comes (incomplete), never silently short."""
        occupied = {self._place(env) for env in range(self.client.num_envs)}
        for place in [place for place in self.left_places if place not in occupied]:
            self.left_places.discard(place)
            queue = self.members.get(place, deque())
            while queue:  # a member given up may queue its replacement here again, within its group's bound
                (seed, options), group, member = queue.popleft()
                self._finish(Episode(-1, seed, options, group=group, group_member=member,
                                     error="env: its group's server was lost before this member could play"))
            self.members.pop(place, None)

    def _start(self, env: int) -> None:
        """Begin the env's next episode, if there is one."""
        following = self._next(env)
        if following is None:
            self.games.pop(env, None)
            self.idle.add(env)
            return
        self.idle.discard(env)
        (seed, options), group, member = following
        self.games[env] = _Game(Episode(env, seed, options, group=group, group_member=member))
        if self.server_scores:  # the server keeps the member's episode for the group's score
            options = options | {GROUP_OPTION: {"id": group, "member": member}}
        self.client.send_reset([env], seed, options)

    def _absorb(self, result: VectorResult) -> None:
        rewards, terminated, truncated = result.rewards.tolist(), result.terminated.tolist(), result.truncated.tolist()
        for k, env in enumerate(result.ids.tolist()):
            game = self.games[env]
            episode = game.episode
            obs, info = result.obs[k], result.infos[k]
            error = result.errors.get(env)
            if isinstance(info.get("turn"), dict):
                episode.turns.append(info["turn"])
            if game.reply is None:  # the answer to a reset
                self.failed_resets = 0 if error is None else self.failed_resets + 1
                if self.failed_resets > self.reset_bound:
                    raise type(error)(f"{self.failed_resets} resets in a row failed, the last with: {error}; "
                                      "check the env and its reset options") from error
                if error is None and self.server_scores and self._place(env) != self.places.get(episode.group or ""):
                    error = EnvError("the env moved to another server at its reset, away from its group's; "
                                     "the member is played again where the group is kept")
                if error is None:
                    if self.system_prompt:
                        episode.messages.append({"role": "system", "content": self.system_prompt})
                    episode.messages.append({"role": "user", "content": obs})
                    episode.info = info
                    game.tools = episode_tools(info, self.client.description)
                    self._think(env)
                    continue
            else:
                episode.messages.append(observation_message(obs, game.reply))
                episode.rewards.append(rewards[k])
                episode.terminated, episode.truncated = terminated[k], truncated[k]
                episode.info = info
                game.reply = None
                if error is None and not (episode.terminated or episode.truncated):
                    self._think(env)
                    continue
            failure = episode_failure(info) if error is None else f"{error}"
            if failure is not None:
                episode.error = f"env: {failure}"
            self._finish(episode)  # first: a member to play again may be started on this env
            self._start(env)

    def _think(self, env: int) -> None:
        """Ask the policy for the env's next turn. The call runs at once until it first waits, then as a task
        (runtime/eager.py): an instant policy costs no task and no loop turn."""
        game = self.games[env]
        call = self.policy(list(game.episode.messages), game.tools)
        if not asyncio.iscoroutine(call):  # another kind of awaitable: a task of its own
            self._wait(env, asyncio.ensure_future(call))
            return
        try:
            done, outcome = self.eager.start(call)
        except Exception as exc:  # the policy failed before it first waited
            self._policy_failed(env, exc)
            return
        if done:
            self._replied(env, outcome)
        else:
            self._wait(env, outcome)

    def _wait(self, env: int, task: asyncio.Future) -> None:
        self.thinking.add(task)
        task.add_done_callback(partial(self._thought, env))

    def _thought(self, env: int, task: asyncio.Future) -> None:
        """A policy call that waited returned."""
        self.thinking.discard(task)
        if task.cancelled():
            return
        try:
            answer = task.result()
        except Exception as exc:
            self._policy_failed(env, exc)
            return
        self._replied(env, answer)

    def _replied(self, env: int, answer: Any) -> None:
        """The policy answered: send its action at once (those of one loop iteration leave together)."""
        try:
            reply = as_reply(answer)
        except TypeError as exc:  # not a Reply or a str
            self._policy_failed(env, exc)
            return
        game = self.games[env]
        game.reply = reply
        game.episode.messages.append(assistant_message(reply))
        game.episode.tokens.append(TurnTokens(reply.prompt_ids, reply.completion_ids, reply.logprobs))
        self.client.send([action_of(reply, self.messages)], [env])

    def _policy_failed(self, env: int, exc: Exception) -> None:
        """The model server (or the policy) failed: this episode only ends."""
        episode = self.games[env].episode
        episode.error = f"policy: {type(exc).__name__}: {exc}"
        self._finish(episode)
        self._start(env)

    async def close(self) -> None:
        tasks = self.thinking | self.scoring
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        self.eager.close()
        await self.client.close()

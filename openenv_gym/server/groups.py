"""The finished episodes of GRPO groups, kept by a worker until their group is scored (episode/groups.py).

A member's episode is kept when it ends (`keep`); the connection's `group` request (`score`) is answered once
the number of members it names have ended, with the environment's `score_group` over them, run once in this
process. What a client never asks for is not kept for ever: a group neither scored nor asked for within
`group_timeout`, or pushed out by `MAX_KEPT_EPISODES`, is dropped, and a request still waiting for members past
that time is answered with a timeout. The counts are in `info` (GET /info).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from openenv_gym.episode.groups import MAX_GROUP_SIZE, FinishedEpisode, GroupScore, group_score
from openenv_gym.errors import BadRequestError, EnvError, ProtocolError, StepTimeoutError
from openenv_gym.server.sessions import Owner

log = logging.getLogger(__name__)

MAX_KEPT_EPISODES = 65_536  # per worker; past it the oldest group is dropped
GroupReply = Callable[[GroupScore | ProtocolError], None]


@dataclass(slots=True)
class _Kept:
    since: float  # when its first member ended, or it was asked for (loop time)
    episodes: dict[int, FinishedEpisode] = field(default_factory=dict)  # member -> its episode
    waiting: tuple[int, GroupReply] | None = None  # a request: (members it waits for, its reply)


class KeptGroups:
    def __init__(self, score_group: Callable[..., Any] | None, env_name: str, timeout: float,
                 score_timeout: float) -> None:
        self.score_group = score_group
        self.scorer = f"score_group of {env_name}"
        self.timeout = timeout
        self.score_timeout = score_timeout
        self.loop = asyncio.get_running_loop()
        self.groups: dict[tuple[Owner, str], _Kept] = {}  # in the order they began: the oldest first
        self.kept = 0  # episodes kept now
        self.counts = {"scored": 0, "failed": 0, "dropped": 0}
        self._scoring: set[asyncio.Task] = set()

    def counters(self) -> dict[str, int]:
        return {"open": len(self.groups), "kept_episodes": self.kept, **self.counts}

    def keep(self, owner: Owner, group: str, episode: FinishedEpisode) -> None:
        kept = self.groups.get((owner, group))
        if kept is None:
            if self.kept >= MAX_KEPT_EPISODES:
                self._drop(next(iter(self.groups)), "the worker keeps too many unscored episodes")
            kept = self.groups[(owner, group)] = _Kept(self.loop.time())
        self.kept += episode.member not in kept.episodes
        kept.episodes[episode.member] = episode  # a member played again replaces the one before
        if kept.waiting is not None and len(kept.episodes) >= kept.waiting[0]:
            self._score(owner, group)

    def score(self, owner: Owner, group: Any, members: Any, reply: GroupReply) -> None:
        """Answer `reply` with the group's score once `members` of its episodes have ended."""
        if self.score_group is None:
            raise BadRequestError("this environment scores no groups (it has no score_group); score the group's "
                                  "rewards on the client, e.g. with openenv_gym.rollout.judges.GroupJudge")
        if type(group) is not str or not group:
            raise BadRequestError(f"field 'group' must be a group id (a non-empty string), got {group!r:.80}")
        if type(members) is not int or not 0 < members <= MAX_GROUP_SIZE:
            raise BadRequestError(f"field 'members' must be an integer from 1 to {MAX_GROUP_SIZE}, got {members!r:.80}")
        kept = self.groups.setdefault((owner, group), _Kept(self.loop.time()))
        if kept.waiting is not None:
            raise BadRequestError(f"group {group!r} is already asked for; wait for that answer")
        kept.waiting = (members, reply)
        if len(kept.episodes) >= members:
            self._score(owner, group)

    def _score(self, owner: Owner, group: str) -> None:
        kept = self._forget((owner, group))
        assert kept.waiting is not None
        episodes = [kept.episodes[m] for m in sorted(kept.episodes)]
        task = self.loop.create_task(self._run(episodes))
        self._scoring.add(task)
        task.add_done_callback(lambda done: self._scored(done, kept.waiting[1]))  # type: ignore[index]

    async def _run(self, episodes: list[FinishedEpisode]) -> GroupScore:
        score = self.score_group
        assert score is not None
        # the environment's own code: a plain function may block, so it runs in a thread
        running = score(episodes) if inspect.iscoroutinefunction(score) else asyncio.to_thread(score, episodes)
        try:
            values = await asyncio.wait_for(running, self.score_timeout)
        except TimeoutError:
            raise StepTimeoutError(
                f"{self.scorer} took longer than the step timeout ({self.score_timeout:g} s)") from None
        except Exception as exc:
            log.error("%s raised", self.scorer, exc_info=exc)
            raise EnvError(f"{self.scorer} raised {type(exc).__name__}: {exc}") from None
        return group_score(values, episodes, self.scorer)

    def _scored(self, task: asyncio.Task, reply: GroupReply) -> None:
        self._scoring.discard(task)
        if task.cancelled():
            return
        outcome = task.exception() or task.result()
        self.counts["failed" if isinstance(outcome, BaseException) else "scored"] += 1
        reply(outcome)

    def _forget(self, key: tuple[Owner, str]) -> _Kept:
        kept = self.groups.pop(key)
        self.kept -= len(kept.episodes)
        return kept

    def _drop(self, key: tuple[Owner, str], why: str) -> None:
        kept = self._forget(key)
        self.counts["dropped"] += 1
        log.warning("dropped group %r of %d kept episodes: %s", key[1], len(kept.episodes), why)
        if kept.waiting is not None:
            members, reply = kept.waiting
            reply(StepTimeoutError(f"group {key[1]!r}: {len(kept.episodes)} of its {members} members ended within "
                                   f"{self.timeout:g} s (the server's group timeout); {why}"))

    def expire(self, now: float) -> int:
        """Drop the groups older than the group timeout; return how many."""
        old = [key for key, kept in self.groups.items() if now - kept.since > self.timeout]
        for key in old:
            self._drop(key, "it was neither scored nor complete in time")
        return len(old)

    def forget_owner(self, owner: Owner) -> None:
        """A connection's sessions ended: so do its groups (nobody can ask for them)."""
        for key in [key for key in self.groups if key[0] is owner]:
            self._forget(key)

    def shutdown(self) -> None:
        for task in self._scoring:
            task.cancel()

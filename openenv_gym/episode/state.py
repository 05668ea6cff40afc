"""The life of an episode: no auto-reset, the step limit, and which failures end a session.

    episode = Episode()
    episode.begin(step_limit(options, default=20), episode_id_of(options))   # at reset
    episode.require_running("session ab12…")         # before a step: NoEpisodeError if none runs
    truncated = episode.count(terminated, truncated)  # after a step: the limit truncates
"""

from __future__ import annotations

import itertools
import os
from typing import Any

from openenv_gym.episode.results import invalid_action
from openenv_gym.errors import BadRequestError, ErrorCode, InvalidActionError, NoEpisodeError, ProtocolError

MAX_STEPS_OPTION = "max_steps"  # the reset option that sets an episode's step limit
EPISODE_ID_OPTION = "episode_id"  # the reset option that names the episode (as OpenEnv's reset does)
# The reset option `env_seconds: true` asks for the seconds the server spent in the episode's reset and steps (the
# environment's, its sandbox's, time, not the policy's) in the final step's info, under the same key: a sampler's
# cost in seconds (openenv_gym.sampling). Asked for, as answers are otherwise the same for the same actions.
ENV_SECONDS = "env_seconds"
# Errors after which the server no longer holds the session: the client forgets its id.
SESSION_ENDING_CODES = frozenset({ErrorCode.ENV_ERROR, ErrorCode.TIMEOUT, ErrorCode.UNKNOWN_SESSION})


class _EpisodeIds:
    """Fresh episode ids in UUID form: 80 random bits drawn once per process (again in a forked child) and a
    48-bit count. Unique like uuid4's, at a fifth of its cost (no system call per id): a server makes one per reset."""

    def __init__(self) -> None:
        self._renew()
        os.register_at_fork(after_in_child=self._renew)

    def _renew(self) -> None:
        self.prefix = os.urandom(10).hex()
        self.count = itertools.count()

    def __call__(self) -> str:
        h = f"{self.prefix}{next(self.count) & 0xFFFFFFFFFFFF:012x}"
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


new_episode_id = _EpisodeIds()


def episode_id_of(options: dict[str, Any] | None) -> str:
    """The id of a new episode: the reset option episode_id, else a fresh one."""
    given = options.get(EPISODE_ID_OPTION) if options else None
    if given is None:
        return new_episode_id()
    if type(given) is not str or not 0 < len(given) <= 255:
        raise BadRequestError(f"option {EPISODE_ID_OPTION} must be a string of 1 to 255 characters, got {given!r:.80}")
    return given


def cost_unit(sampler: Any) -> str:
    """What a task sampler counts its costs in: "episodes" (none given), "tokens" or "seconds" (its `costs_in`)."""
    return getattr(sampler, "costs_in", "episodes")


def seconds_asked(sampler: Any) -> dict[str, bool]:
    """The reset option a sampler's costs need: env_seconds where it counts seconds, else none."""
    return {ENV_SECONDS: True} if cost_unit(sampler) == "seconds" else {}


def env_seconds(info: dict[str, Any]) -> float:
    """An episode's env_seconds, from its final info; ValueError where its server measured none."""
    seconds = info.get(ENV_SECONDS)
    if not isinstance(seconds, int | float):
        raise ValueError(f"the sampler counts cost in seconds, but the episode's final info has no {ENV_SECONDS}: its "
                         "server measures none (an openenv_gym server does; ORS and OpenEnv servers do not); use "
                         "cost='episodes' or 'tokens'")
    return float(seconds)


def timing_of(options: dict[str, Any] | None) -> tuple[bool, dict[str, Any] | None]:
    """Whether a reset asks for its episode's env_seconds, and the options the environment gets (without it)."""
    if not options or ENV_SECONDS not in options:
        return False, options
    asked = options[ENV_SECONDS]
    if type(asked) is not bool:
        raise BadRequestError(f"option {ENV_SECONDS} must be true or false, got {asked!r:.80}")
    return asked, {key: value for key, value in options.items() if key != ENV_SECONDS}


def step_limit(options: dict[str, Any] | None, default: int | None) -> int | None:
    """The step limit of an episode: the reset option max_steps, else the environment's own (None: no limit)."""
    if not options or MAX_STEPS_OPTION not in options:
        return default
    limit = options[MAX_STEPS_OPTION]
    if type(limit) is not int or limit < 1:
        raise BadRequestError(f"option {MAX_STEPS_OPTION} must be a positive integer, got {limit!r}")
    return limit


class Episode:
    """Whether an episode runs, and its steps against its limit. There is no auto-reset: a step when
    none runs is refused, and only a reset starts the next episode."""

    __slots__ = ("episode_id", "limit", "live", "steps")

    def __init__(self) -> None:
        self.live = False
        self.steps = 0
        self.limit: int | None = None
        self.episode_id: str | None = None

    def begin(self, limit: int | None, episode_id: str) -> None:
        self.live, self.steps, self.limit, self.episode_id = True, 0, limit, episode_id

    def require_running(self, subject: str) -> None:
        if not self.live:
            raise no_episode(subject)

    def state(self, session: str | None) -> dict[str, Any]:
        """What is known of a session's episode, as `state` answers it (an environment may add "extras")."""
        return {"session": session, "episode_id": self.episode_id, "running": self.live, "steps": self.steps,
                "max_steps": self.limit}

    def count(self, terminated: bool, truncated: bool) -> bool:
        """Count an answered step (invalid actions count too); return `truncated`, which the limit may set."""
        self.steps += 1
        if not (terminated or truncated) and self.limit is not None and self.steps >= self.limit:
            truncated = True
        if terminated or truncated:
            self.live = False
        return truncated


def no_episode(subject: str, what_to_do: str = "call reset to start one") -> NoEpisodeError:
    return NoEpisodeError(f"{subject}: no episode is running (it ended, or was never reset); {what_to_do}")


def ends_session(error: BaseException) -> bool:
    """After this failure the server holds no session for the request: the environment raised or timed out,
    the session was unknown, or no answer came (the connection dropped, the client gave up waiting)."""
    return not isinstance(error, ProtocolError) or error.code in SESSION_ENDING_CODES


def failure_outcome(error: BaseException, stepped: bool) -> tuple[str, dict, bool, bool]:
    """What an env whose request failed reports: (obs, info, truncated, episode still running).

    An action that could not even be read reads like the environment's own invalid-action observation and
    the episode goes on; any other failure ends the episode (a failed step counts as truncated) and is
    reported in info["error"]."""
    if isinstance(error, InvalidActionError):
        result = invalid_action(error.message)
        return result.obs, result.info, False, True
    wire = error.to_wire() if isinstance(error, ProtocolError) else {
        "code": type(error).__name__, "message": str(error)}
    return "", {"error": wire}, stepped, False

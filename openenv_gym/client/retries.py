"""Resets sent again: which failures of a reset are its server's and not the env's, how soon to try again, and for
how long (one rule for the vector client and the single env), and the vector client's half that does it.

A reset that failed because its server went away (the connection was lost, nothing listens there any more),
was full, or no longer knew the session, starts the episode elsewhere or later: the client moves it to a live
server and tries again with backoff, within a window. Only then does the failure reach the caller, saying how
often it was tried. An env's own failures (its reset raised, or took too long) are never tried again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from openenv_gym.client.results import RESET
from openenv_gym.client.transport import Answers, Pending
from openenv_gym.errors import (
    CapacityError,
    ConnectionLostError,
    ResumeFailedError,
    ServerUnreachableError,
    UnknownSessionError,
)

# Seconds a reset is tried for before its failure is reported (the clients' argument reset_retry_window).
DEFAULT_RESET_RETRY_WINDOW = 10.0
BACKOFF = (0.05, 2.0)  # seconds before the third try (the second follows at once), and at most between tries
Reset = tuple[int | None, dict | None]  # what one env's reset asks for: (seed, options)
RETRIED = (ConnectionLostError, ServerUnreachableError, CapacityError, ResumeFailedError, UnknownSessionError)


def retried(error: BaseException | None) -> bool:
    """Whether a reset that failed with `error` is tried again: the failure was where it ran, not the env."""
    return isinstance(error, RETRIED)


def delay(failed: int) -> float:
    """Seconds to wait before the next try, after `failed` tries failed: none after the first (the env has moved
    to another server by then), then doubling."""
    return 0.0 if failed <= 1 else min(BACKOFF[0] * 2 ** (failed - 2), BACKOFF[1])


def given_up(error: Exception, tries: int, seconds: float, serving: list[str]) -> Exception:
    """The error a caller gets once a reset was tried `tries` times over `seconds`: the last one, saying so, and
    what to do when no server serves."""
    tried = f"tried {tries} times over {seconds:.1f} s"
    message = (f"no server serves now, so the episode could not start ({tried}); the last failure: {error}. Start "
               "a server, or wait until one is back, and reset again" if not serving
               else f"{error} (the reset was {tried}; servers in use: {', '.join(serving)})")
    try:
        return type(error)(message)
    except TypeError:  # an error class with another signature: keep it as it is
        return error


@dataclass(frozen=True, slots=True)
class Try:
    """One try of resets: when they were asked for (loop time), and how many tries failed before."""

    began: float
    failed: int = 0


class ResetRetries:
    """The half of AsyncVectorClient that sends resets again (AsyncVectorClient sets these attributes and has
    the methods below that raise NotImplementedError)."""

    reset_retry_window: float
    transports: list
    _serving: list[int]
    _unbalanced: bool
    _pending: list[Pending]

    @property
    def urls(self) -> list[str]:
        raise NotImplementedError

    def _watch_servers(self, envs: list[int]) -> None:
        raise NotImplementedError

    def _move(self, envs: list[int]) -> None:
        raise NotImplementedError

    def _rebalance(self, envs: list[int]) -> None:
        raise NotImplementedError

    def _send(self, envs: list[int], values: Sequence[Any], together: bool = False, reset: Try | None = None) -> None:
        raise NotImplementedError

    def _arrived(self, kind: int, envs: list[int], answers: Answers) -> None:
        raise NotImplementedError

    def _reset_on_live_servers(self, envs: list[int], resets: Sequence[Reset], reset: Try,
                               full: Sequence[int] = (), together: bool = False) -> None:
        """Send resets (a (seed, options) per env), having moved envs off lost servers, and those in `full` off the
        server that was full; `together`: answered all at once (a lock-step batch), where the server can."""
        self._watch_servers(envs)
        if full and self._serving:
            self._move(list(full))
        if self._unbalanced:
            self._rebalance(envs)
        self._send(envs, resets, together, reset=reset)

    def _reset_arrived(self, envs: list[int], resets: Sequence[Reset], reset: Try, answers: Answers) -> None:
        """Reset answers: those that failed for their server are tried again, the others arrive."""
        if answers.errors is not None:
            answers = self._retry_failed(envs, resets, reset, answers)
            if not answers.offsets:
                return
        if reset.failed:
            answers.infos = [info | {"retries": reset.failed} for info in answers.infos]
        self._arrived(RESET, envs, answers)

    def _retry_failed(self, envs: list[int], resets: Sequence[Reset], reset: Try, answers: Answers) -> Answers:
        """Schedule the next try of the resets that failed for their server, within the window; return the other
        answers (the failures past the window say how often they were tried)."""
        errors = answers.errors
        assert errors is not None
        again = [j for j, error in enumerate(errors) if retried(error)]
        if not again:
            return answers
        loop = asyncio.get_running_loop()
        spent = loop.time() - reset.began
        if spent >= self.reset_retry_window:
            if reset.failed:
                for j in again:
                    errors[j] = given_up(errors[j], reset.failed + 1, spent, self.urls)  # type: ignore[arg-type]
            return answers
        offsets = answers.offsets
        retry = _Retry(self, [envs[offsets[j]] for j in again], [resets[offsets[j]] for j in again],
                       Try(reset.began, reset.failed + 1), [errors[j] for j in again])  # type: ignore[misc]
        retry.timer = loop.call_later(delay(retry.reset.failed), retry.fire)
        self._pending.append(retry)
        retrying = set(again)
        return _pick(answers, [j for j in range(len(offsets)) if j not in retrying])

    def _cancel_retries(self) -> None:
        for pending in self._pending:
            if isinstance(pending, _Retry):
                pending.cancel()


class _Retry(Pending):
    """Resets to try again once their backoff has passed; abandoned (gather's timeout), they fail as they did."""

    def __init__(self, client: ResetRetries, envs: list[int], resets: list[Reset], reset: Try,
                 errors: list[Exception]) -> None:
        self.client, self.envs, self.resets, self.reset, self.errors = client, envs, resets, reset, errors
        self.timer: asyncio.TimerHandle | None = None
        self.fired = False

    @property
    def done(self) -> bool:
        return self.fired

    def fire(self) -> None:
        self.fired = True
        if self.client.transports:  # not closed meanwhile
            full = [env for env, error in zip(self.envs, self.errors, strict=True) if isinstance(error, CapacityError)]
            self.client._reset_on_live_servers(self.envs, self.resets, self.reset, full)

    def cancel(self) -> None:
        self.fired = True
        if self.timer is not None:
            self.timer.cancel()

    def abandon(self, error: Exception) -> None:
        if not self.fired:
            self.cancel()
            self.client._arrived(RESET, self.envs, Answers.of(range(len(self.envs)), self.errors))


def _pick(answers: Answers, keep: list[int]) -> Answers:
    """The entries `keep` of `answers`."""
    errors = answers.errors
    return Answers([answers.offsets[j] for j in keep], [answers.obs[j] for j in keep],
                   [answers.rewards[j] for j in keep], [answers.terminated[j] for j in keep],
                   [answers.truncated[j] for j in keep], [answers.infos[j] for j in keep],
                   None if errors is None or all(errors[j] is None for j in keep) else [errors[j] for j in keep])

"""`ServerSampler(url)`: the task sampler of a server started with `openenv-gym serve ENV --sampler NAME`, shared by
every rollout worker that names it, on any machine: `sample` and `update` go over the wire (a WebSocket on
/sampler, server/sampler_relay.py), so one curriculum learns from every worker's groups. Its calls block: each
is one round trip (a fraction of a millisecond on one machine), made once per group.

    sampler = ServerSampler("ws://envs:8000")
    async for group in openenv_gym.rollouts(env, policy, sampler=sampler, group_size=sampler.group_size, ...):

A worker that loses the server goes on with a local uniform sampler over the same tasks, says so once, and asks
the server again after `retry_after` seconds; what it played meanwhile is not given to the server's sampler.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from typing import Any

import orjson
from websockets.exceptions import InvalidStatus, WebSocketException
from websockets.sync.client import ClientConnection, connect

from openenv_gym.sampling.samplers import UniformSampler

log = logging.getLogger(__name__)


MAX_ANSWER_BYTES = 64 * 2**20  # a sample of many tasks, or the state of a large catalog


class SamplerUnavailableError(ConnectionError):
    """The server's sampler did not answer (the server is down, or was started without --sampler)."""


class ServerSampler:
    def __init__(self, url: str, *, token: str | None = None, timeout: float = 10.0, retry_after: float = 10.0,
                 seed: int | None = None) -> None:
        self.url = url
        self.token = token if token is not None else os.environ.get("OPENENV_GYM_TOKEN")
        self.timeout, self.retry_after, self.seed = timeout, retry_after, seed
        self.socket: ClientConnection | None = None
        described = self._call({"call": "describe"})
        self.name: str = described["sampler"]
        self.group_size: int = described["group_size"]
        self.tasks: list[dict[str, Any]] = described["tasks"]
        self.costs_in: str = described["costs_in"]
        self.local: UniformSampler | None = None  # the fallback, while the server does not answer
        self.lost_until = 0.0  # when to ask the server again
        self.unsent = 0  # groups played on the fallback: the server's sampler never saw them

    def __reduce__(self) -> tuple:
        """Pickled as its address (a Ray worker or a trainer's process opens its own connection)."""
        return _remade, (self.url, self.token, self.timeout, self.retry_after, self.seed)

    def _call(self, request: dict[str, Any]) -> Any:
        try:
            if self.socket is None:
                self.socket = self._connect()
            self.socket.send(orjson.dumps(request).decode())
            answer = orjson.loads(self.socket.recv(timeout=self.timeout))
        except (OSError, TimeoutError, WebSocketException) as exc:
            self.close()
            raise SamplerUnavailableError(f"the sampler of {self.url} does not answer: {exc}") from exc
        error = answer.get("error")
        if error is None:
            return answer["result"]
        if error["code"] == "unavailable":
            raise SamplerUnavailableError(error["message"])
        raise ValueError(f"the sampler of {self.url} refused: {error['message']}")

    def _connect(self) -> ClientConnection:
        base = self.url.rstrip("/").replace("http://", "ws://", 1).replace("https://", "wss://", 1)
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else None
        try:
            return connect(base + "/sampler", additional_headers=headers, open_timeout=self.timeout,
                           max_size=MAX_ANSWER_BYTES, compression=None)
        except InvalidStatus as exc:
            if exc.response.status_code == 404:
                raise SamplerUnavailableError(f"{self.url} shares no sampler: start it with `openenv-gym serve ENV "
                                              "--sampler NAME`") from None
            raise SamplerUnavailableError(f"{self.url} refused the sampler's connection: "
                                          f"{exc.response.body.decode(errors='replace')[:300]}") from None

    def _served(self, request: dict[str, Any]) -> tuple[bool, Any]:
        """(True, the server's answer), or (False, None) while the server is lost (the fallback then answers)."""
        if self.local is not None and time.monotonic() < self.lost_until:
            return False, None
        try:
            answer = self._call(request)
        except SamplerUnavailableError as exc:
            if self.local is None:
                log.warning("%s; sampling tasks locally and uniformly until it answers again (asked every %g s)",
                            exc, self.retry_after)
                self.local = UniformSampler(self.tasks, group_size=self.group_size, seed=self.seed)
            self.lost_until = time.monotonic() + self.retry_after
            return False, None
        if self.local is not None:
            log.warning("the sampler of %s answers again; %d groups played meanwhile were not given to it", self.url,
                        self.unsent)
            self.local = None
        return True, answer

    def sample(self, n: int) -> list[dict[str, Any]]:
        served, tasks = self._served({"call": "sample", "n": n})
        return tasks if served else self.local.sample(n)  # type: ignore[union-attr]

    def update(self, task: dict[str, Any], rewards: Sequence[float], costs: Sequence[float] | None = None) -> None:
        served, _ = self._served({"call": "update", "task": task, "rewards": list(rewards),
                                  "costs": None if costs is None else list(costs)})
        if not served:
            self.unsent += 1
            self.local.update(task, rewards, costs)  # type: ignore[union-attr]

    def note(self, what: str) -> None:
        served, _ = self._served({"call": "note", "what": what})
        if not served:
            self.local.note(what)  # type: ignore[union-attr]

    def metrics(self) -> dict[str, float]:
        """The server's sampler's metrics (over every worker's groups), and how many groups this worker played
        on its fallback."""
        served, metrics = self._served({"call": "metrics"})
        return (metrics if served else self.local.metrics()) | {"groups_unsent": self.unsent}  # type: ignore[union-attr]

    def state_dict(self) -> dict[str, Any]:
        return self._call({"call": "state"})

    def load_state_dict(self, state: dict[str, Any]) -> None:
        raise ValueError("the server's sampler is restored from its own state file: start the server with "
                         "--sampler-state FILE")

    def close(self) -> None:
        socket, self.socket = self.socket, None
        if socket is not None:
            socket.close()


def _remade(url: str, token: str | None, timeout: float, retry_after: float, seed: int | None) -> ServerSampler:
    return ServerSampler(url, token=token, timeout=timeout, retry_after=retry_after, seed=seed)

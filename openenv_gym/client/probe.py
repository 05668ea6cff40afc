"""The transport of `openenv/remote`: it asks the server what it speaks, then drives it with that transport.

    env = gym.make("openenv/remote", base_url="http://host:port")

An openenv_gym server answers GET /info with its protocol; an OpenEnv server answers GET /schema with its
action, observation and state schemas; an ORS server answers GET /list_environments (`env=` picks one when it
serves several). The first that answers decides. Everything after is the chosen transport's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx

from openenv_gym.client.native.handshake import websocket_url
from openenv_gym.client.openenv import http_url
from openenv_gym.client.transport import Pending, Reply, Transport, TransportSession
from openenv_gym.episode.results import Action
from openenv_gym.errors import ServerUnreachableError


async def probe(url: str, token: str | None, timeout: float) -> str:
    """"native", "openenv" or "ors": what the server at `url` speaks."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(base_url=http_url(url), headers=headers, timeout=timeout) as http:
        try:
            info = await http.get("/info")
            if info.status_code == 401 or (info.is_success and "protocol" in _json(info)):
                return "native"
            schema = await http.get("/schema")
            if schema.is_success and "action" in _json(schema):
                return "openenv"
            listed = await http.get("/list_environments")
            if listed.is_success and isinstance(listed.json(), list):
                return "ors"
        except httpx.HTTPError as exc:
            raise ServerUnreachableError(f"cannot reach {url}: {exc}") from None
    raise ServerUnreachableError(
        f"the server at {url} speaks none of the protocols openenv_gym drives: it answers neither GET /info "
        "(openenv_gym), GET /schema (OpenEnv) nor GET /list_environments (ORS)")


def _json(response: httpx.Response) -> dict:
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


class ProbedTransport(Transport):
    def __init__(self, url: str, **options: Any) -> None:
        self.url = url
        self.options = options
        self.inner: Transport | None = None
        self.description: dict[str, Any] = {}

    @classmethod
    def local_url(cls, env: str, workers: int = 1, env_args: dict[str, Any] | None = None,
                  sandbox: bool = True) -> str:
        raise ValueError('gym.make("openenv/remote") drives a running server: pass base_url="http://host:port"')

    async def open(self) -> ProbedTransport:
        from openenv_gym.client.transports import transport_class

        speaks = await probe(self.url, self.options.get("token"), self.options.get("open_timeout", 10.0))
        options = dict(self.options)
        if speaks == "ors" and options.get("env") is None:
            options["env"] = await self._only_ors_env()
        url = websocket_url(http_url(self.url)) if speaks == "native" else http_url(self.url)
        self.inner = await transport_class(speaks)(url, **options).open()
        self.description = self.inner.description
        return self

    async def _only_ors_env(self) -> str:
        async with httpx.AsyncClient(base_url=http_url(self.url), timeout=10.0) as http:
            names = (await http.get("/list_environments")).json()
        if len(names) != 1:
            raise ValueError(f"the ORS server at {self.url} serves {', '.join(names) or 'no environment'}: "
                             "name one with env=")
        return names[0]

    def _opened(self) -> Transport:
        if self.inner is None:
            raise RuntimeError("open the transport first")
        return self.inner

    async def close(self) -> None:
        if self.inner is not None:
            await self.inner.close()

    @property
    def closed(self) -> bool:
        return self.inner is not None and self.inner.closed

    def session(self) -> TransportSession:
        return self._opened().session()

    def sessions(self, count: int, align: int = 1) -> list[TransportSession]:
        return self._opened().sessions(count, align)

    async def splits(self) -> list[dict[str, Any]]:
        return await self._opened().splits()

    async def tasks(self, split: str | None = None, start: int | None = None,
                    stop: int | None = None) -> list[dict[str, Any]]:
        return await self._opened().tasks(split, start, stop)

    def send_resets(self, sessions: Sequence[TransportSession], seeds: Sequence[int | None],
                    options: Sequence[dict | None], reply: Reply, together: bool = False) -> Pending:
        return self._opened().send_resets(sessions, seeds, options, reply, together)

    def send_steps(self, sessions: Sequence[TransportSession], actions: Sequence[Action], reply: Reply,
                   together: bool = False) -> Pending:
        return self._opened().send_steps(sessions, actions, reply, together)

"""Where a vector client's envs sit, and the servers as they come and go: the half of AsyncVectorClient that
places sessions on servers, notices a lost one, asks the source of the servers (servers.py) for new ones, and
moves envs at their resets, off lost servers and onto servers that joined.

An env's session only ever moves at its reset: an episode stays on its server.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable, Coroutine
from functools import partial
from typing import Any

from openenv_gym.client.servers import FixedServers, ServerSource
from openenv_gym.client.transport import Transport, TransportSession

log = logging.getLogger(__name__)

# Seconds between askings of the server source: while a server it lists is out of reach, or a lost one may be
# replaced soon (for REPLACE_WAIT seconds after a loss, until a server joins: a Ray actor restarting elsewhere), and
# otherwise (a source whose servers change: a DNS name, a Ray handle; a fixed list is asked only after a loss).
REFRESH_RETRY, REFRESH_EVERY, REPLACE_WAIT = 1.0, 10.0, 60.0
Group = tuple[Transport, list[int], list[TransportSession]]  # a transport, envs on it, their sessions


class Fleet:
    """The placement half of AsyncVectorClient, which sets these attributes."""

    num_envs: int
    source: ServerSource
    description: dict[str, Any]
    transports: list[Transport]  # every server ever opened; lost ones stay, out of `_serving`
    sessions: list[TransportSession]
    transport_of: list[int]  # env -> index into transports
    _transport_class: Callable[..., Transport]
    _options: dict[str, Any]
    _placement: list[Group] | None  # every env grouped by transport, made when needed
    _serving: list[int]  # the transports whose server serves
    _load: list[int]  # envs placed on each transport
    _unbalanced: bool  # envs sit on a lost server, or more than their share on one
    _refreshing: asyncio.Task | None
    _next_refresh: float  # when to ask the source again (loop time)
    _replacing_until: float  # after a loss, until when (loop time) a replacement is looked for every REFRESH_RETRY
    _moved: dict[int, dict[str, str]]  # env -> {"from", "to"}, told at its reset's answer
    _chores: set[asyncio.Task]  # closing what is no longer used: left sessions, refused servers

    @property
    def urls(self) -> list[str]:
        """The URLs of the servers in use."""
        return [self.transports[u].url for u in self._serving]

    async def _open_transport(self, url: str) -> Transport:
        transport = self._transport_class(url, **self._options)
        if not isinstance(self.source, FixedServers):
            transport.server_gone = partial(self._unlisted, url)
        return await transport.open()

    async def _unlisted(self, url: str) -> bool:
        """Whether the source no longer lists `url`: its server is gone (a replaced Ray actor, a deleted pod), so a
        dropped connection to it need not wait out the resume window."""
        try:
            return url not in await asyncio.to_thread(self.source.urls)
        except Exception:  # the source cannot tell now: keep trying to resume
            return False

    def _adopt(self, sessions: list[TransportSession]) -> None:
        """Adopt a new list of sessions (never changed in place: transports may remember a list they saw)."""
        self.sessions = sessions
        self._placement = None

    def _all_groups(self) -> list[Group]:
        if self._placement is None:
            by_transport: dict[int, tuple[list[int], list[TransportSession]]] = {}
            for env, (u, session) in enumerate(zip(self.transport_of, self.sessions, strict=True)):
                envs, group = by_transport.setdefault(u, ([], []))
                envs.append(env)
                group.append(session)
            self._placement = [(self.transports[u], envs, group) for u, (envs, group) in by_transport.items()]
        return self._placement

    def _relocate(self, moves: dict[int, list[int]]) -> None:
        """Give each env of moves[u] a new session on transport u; the old ones on servers that serve end."""
        if not moves:
            return
        sessions = list(self.sessions)
        left = []
        for u, envs in moves.items():
            for env, session in zip(envs, self.transports[u].sessions(len(envs)), strict=True):
                old = self.transport_of[env]
                if not self.transports[old].closed:
                    left.append(sessions[env])
                self._load[old] -= 1
                self._load[u] += 1
                self.transport_of[env] = u
                sessions[env] = session
        self._adopt(sessions)
        if left:
            self._chore(_close_all(left))

    def _move(self, envs: list[int]) -> None:
        """Place sessions that found their server full on the next server."""
        moves: dict[int, list[int]] = {}
        for env in envs:
            current = self.transport_of[env]
            later = [u for u in self._serving if u > current]
            moves.setdefault((later or self._serving)[0], []).append(env)
        self._relocate(moves)

    # -- servers lost and found -----------------------------------------------------------------------

    def _watch_servers(self, envs: list[int]) -> None:
        """At a reset of `envs`: notice lost servers (their envs move at this reset, see _rebalance), and ask the
        source for its servers when it is time. Only the servers of the resetting envs are looked at first: a
        single env's reset must not cost a look at every connection of every server."""
        if any(self.transports[u].closed for u in {self.transport_of[env] for env in envs}):
            self._forget_lost()
        loop = asyncio.get_running_loop()
        if self._refreshing is None and loop.time() >= self._next_refresh:
            self._refreshing = loop.create_task(self._refresh())

    def _forget_lost(self) -> None:
        lost = [u for u in self._serving if self.transports[u].closed]
        if lost:
            self._serving = [u for u in self._serving if u not in lost]
            log.warning("lost the server(s) %s; their envs move to the other servers at their next reset",
                        ", ".join(self.transports[u].url for u in lost))
            self._unbalanced = True
            self._next_refresh = 0.0
            self._replacing_until = asyncio.get_running_loop().time() + REPLACE_WAIT

    def _asked(self, missing: bool) -> None:
        """When to ask the source next, having asked it now."""
        now = asyncio.get_running_loop().time()
        changing = not isinstance(self.source, FixedServers)
        wait = REFRESH_RETRY if missing or now < self._replacing_until else REFRESH_EVERY if changing else math.inf
        self._next_refresh = now + wait

    async def _refresh(self) -> None:
        """Ask the source for its servers; open those not in use (a restarted one, a new one)."""
        missing = True
        try:
            urls = await asyncio.to_thread(self.source.urls)
            serving = set(self.urls)
            new = [url for url in dict.fromkeys(urls) if url not in serving]
            opened = await asyncio.gather(*(self._open_transport(url) for url in new), return_exceptions=True)
            missing = False
            for url, transport in zip(new, opened, strict=True):
                if isinstance(transport, BaseException):
                    missing = True
                    log.info("server %s is not reachable yet: %s", url, transport)
                elif self._join(transport):
                    log.warning("server %s joined; envs move to it as they reset", url)
        except Exception as exc:  # the source failed: ask again soon
            log.warning("asking %r for its servers failed: %s", self.source, exc)
        finally:
            self._refreshing = None
            self._asked(missing)

    def _join(self, transport: Transport) -> bool:
        if not self.transports:  # closed meanwhile
            self._chore(transport.close())
            return False
        name, served = self.description.get("name"), transport.description.get("name")
        if served != name:
            log.warning("server %s serves %r, not %r: not used", transport.url, served, name)
            self._chore(transport.close())
            return False
        self.transports.append(transport)
        self._serving.append(len(self.transports) - 1)
        self._load.append(0)
        self._unbalanced = True
        self._replacing_until = 0.0
        return True

    def _chore(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._chores.add(task)  # held: the loop keeps only a weak reference
        task.add_done_callback(self._chores.discard)

    def _rebalance(self, envs: list[int]) -> None:
        """Move resetting envs off lost servers, and off servers holding more than their share onto the least
        loaded one (a server that joined). An env's session only ever moves at its reset."""
        if not self._serving:
            return  # nowhere to go: the resets fail, and say why
        serving = set(self._serving)
        share = -(-self.num_envs // len(serving))  # ceil
        planned = list(self._load)
        moves: dict[int, list[int]] = {}
        for env in envs:
            old = self.transport_of[env]
            if old in serving and planned[old] <= share:
                continue
            new = min(self._serving, key=planned.__getitem__)
            if old in serving and planned[new] + 1 >= planned[old]:
                continue  # no better place
            planned[old] -= 1
            planned[new] += 1
            moves.setdefault(new, []).append(env)
            if old not in serving:
                self._moved[env] = {"from": self.transports[old].url, "to": self.transports[new].url}
        self._relocate(moves)
        self._unbalanced = any(load > share if u in serving else load > 0 for u, load in enumerate(self._load))



async def _close_all(sessions: list[TransportSession]) -> None:
    await asyncio.gather(*(session.close() for session in sessions), return_exceptions=True)

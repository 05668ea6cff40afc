"""One session of the native protocol, over a multiplexed Connection."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from openenv_gym.client.transport import StepTuple, TransportSession
from openenv_gym.episode.results import Action
from openenv_gym.episode.state import Episode, ends_session
from openenv_gym.errors import ConnectionLostError, UnknownSessionError, error_from_wire
from openenv_gym.protocol import native as p

if TYPE_CHECKING:
    from openenv_gym.client.native.connection import Connection


class Session(TransportSession):
    """One environment instance on the server. `id` is None until the first reset."""

    __slots__ = ("connection", "id")

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self.id: str | None = None

    async def _request(self, message: dict) -> dict:
        try:  # the future itself, not Connection.request: one coroutine less per step
            response = await self.connection.submit(message)
            if "error" in response:
                raise error_from_wire(response["error"])
        except Exception as exc:
            if ends_session(exc):
                self.id = None  # the server no longer holds it; the next reset starts a new one
            raise
        return response

    async def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[str, dict]:
        conn = self.connection
        response = await self._request(p.reset_request(conn.next_id(), self.id, seed, options))
        self.id = response["session"]
        return response["obs"], response["info"]

    async def step(self, action: Action) -> StepTuple:
        conn = self.connection
        r = await self._request(p.step_request(conn.next_id(), self.id, action))
        return r["obs"], r["reward"], r["terminated"], r["truncated"], r["info"]

    async def state(self) -> dict[str, Any]:
        if self.id is None:
            return Episode().state(None)  # never reset, or ended by the server: nothing runs
        state = await self._request(p.state_request(self.connection.next_id(), self.id))
        del state["id"]
        return state

    async def close(self) -> None:
        """End the session on the server. Idempotent."""
        if self.id is None or self.connection.closed:
            self.id = None
            return
        session_id, self.id = self.id, None
        with contextlib.suppress(UnknownSessionError, ConnectionLostError):  # already gone
            await self.connection.request(p.close_request(self.connection.next_id(), session_id))

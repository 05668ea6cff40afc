"""When single requests time out: one timer for all of them, not one per request.

A connection's requests share one timeout and are sent in the order of their ids, so their deadlines come in
that order too. They are kept in buckets of a fraction of the timeout (the time the bucket opened, the last id
put in it); when a bucket's time is up, every request still waiting up to its last id expires. A request is thus
given up between `timeout` and `timeout + granularity` after it was sent. A timer and a callback per request
would cost more than the rest of sending it.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable


class Deadlines:
    __slots__ = ("_buckets", "_expire_through", "_granularity", "_loop", "_timeout", "_timer")

    def __init__(self, loop: asyncio.AbstractEventLoop, timeout: float, expire_through: Callable[[int], None]) -> None:
        """expire_through(rid): fail every request still waiting whose id is at most rid."""
        self._loop, self._timeout, self._expire_through = loop, timeout, expire_through
        self._granularity = min(1.0, timeout / 10)
        self._buckets: deque[list] = deque()  # [opened at, last request id]
        self._timer: asyncio.TimerHandle | None = None

    def add(self, rid: int) -> None:
        now = self._loop.time()
        buckets = self._buckets
        if buckets and now < buckets[-1][0] + self._granularity:
            buckets[-1][1] = rid
            return
        buckets.append([now, rid])
        if self._timer is None:
            self._arm()

    def _due(self, bucket: list) -> float:
        return bucket[0] + self._granularity + self._timeout

    def _arm(self) -> None:
        self._timer = self._loop.call_at(self._due(self._buckets[0]), self._fire)

    def _fire(self) -> None:
        self._timer = None
        now, buckets = self._loop.time(), self._buckets
        while buckets and self._due(buckets[0]) <= now:
            self._expire_through(buckets.popleft()[1])
        if buckets:
            self._arm()

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._buckets.clear()

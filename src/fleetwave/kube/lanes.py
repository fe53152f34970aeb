"""Two lanes for one client's requests: the bulk lane, bounded, and everything else, past it.

An API server without priority and fairness (or one that puts all of a controller's requests in one
flow) runs every request it gets at once and shares its CPU among them, so one request's wait grows
with how many are in flight. A controller makes most of its requests in bulk — one or two per
cluster of every rollout — and few that decide for many clusters at once: a promotion opening a stage
when its gate opens. Requests made inside `bulk()` wait for one of the client's bulk slots; others
go straight to the connection pool, so under load a decision waits behind at most the bulk lane
instead of behind every bulk request issued (ADR 0068, addendum 929c24d).

How many bulk slots a server should get depends on the server: a stage of a thousand summaries
wants many writes in flight while each is answered quickly, and a server already slow to answer
only makes a decision wait longer for each more. So the lane's width follows the bulk round trip
(`Width`, ADR 0150): wide while answers come back within a target, narrower while they do not.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import httpx2

_BULK: contextvars.ContextVar[bool] = contextvars.ContextVar("fleetwave_bulk_lane", default=False)


@contextlib.contextmanager
def bulk() -> Iterator[None]:
    """Requests made inside (and in tasks started inside) go in the bulk lane."""
    token = _BULK.set(True)
    try:
        yield
    finally:
        _BULK.reset(token)


def in_bulk() -> bool:
    return _BULK.get()


@dataclass(slots=True)
class Width:
    """How many bulk requests may be in flight: between `least` and `most`, following a moving
    average of the bulk round trips (each answer weighs `weight`). Above `target` seconds the width
    shrinks by one per answer; under half of it, it grows by one per answer; between, it holds, so
    it settles where the server answers in about `target` (pure: the transport feeds it seconds)."""

    least: int
    most: int
    target: float
    weight: float = 0.2
    slots: int = 0
    average: float = 0.0

    def __post_init__(self) -> None:
        if not 1 <= self.least <= self.most:
            raise ValueError("a bulk lane needs at least one slot, and no fewer at least than at most")
        self.slots = self.slots or self.most

    def answered(self, seconds: float) -> None:
        self.average += self.weight * (seconds - self.average)
        if self.average > self.target:
            self.slots = max(self.least, self.slots - 1)
        elif self.average < self.target / 2:
            self.slots = min(self.most, self.slots + 1)


class Laned(httpx2.AsyncBaseTransport):
    """`inner` with at most `width.slots` bulk requests in flight at once: a slot is held until the
    response's headers arrive (the server has done its work by then), and that round trip moves the
    width. Waiting requests go out first come, first served; any other request goes past the lane."""

    def __init__(
        self,
        inner: httpx2.AsyncBaseTransport,
        width: Width,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.inner, self.width, self._clock = inner, width, clock
        self._in_flight = 0
        self._waiting: collections.deque[asyncio.Future[None]] = collections.deque()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if not in_bulk():
            return await self.inner.handle_async_request(request)
        await self._take_slot()
        sent = self._clock()
        try:
            response = await self.inner.handle_async_request(request)
            self.width.answered(self._clock() - sent)
            return response
        finally:
            self._in_flight -= 1
            self._hand_over()

    @property
    def in_flight(self) -> int:
        return self._in_flight

    async def _take_slot(self) -> None:
        if not self._waiting and self._in_flight < self.width.slots:
            self._in_flight += 1
            return
        granted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append(granted)
        try:
            await granted
        except asyncio.CancelledError:
            # A slot handed over just before the cancel is counted: give it to the next.
            if not granted.cancelled():
                self._in_flight -= 1
                self._hand_over()
            raise

    def _hand_over(self) -> None:
        """Wakes waiting requests, oldest first, while the lane has room; the slot is counted here,
        so no request that came later can take it first."""
        while self._waiting and self._in_flight < self.width.slots:
            granted = self._waiting.popleft()
            if granted.done():  # cancelled while it waited
                continue
            self._in_flight += 1
            granted.set_result(None)

    async def aclose(self) -> None:
        await self.inner.aclose()


__all__ = ["Laned", "Width", "bulk", "in_bulk"]

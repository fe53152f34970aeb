"""Two lanes for one client's requests: the bulk lane, bounded, and everything else, past it.

An API server without priority and fairness (or one that puts all of a controller's requests in one
flow) runs every request it gets at once and shares its CPU among them, so one request's wait grows
with how many are in flight. A controller makes most of its requests in bulk — one or two per
cluster of every rollout — and few that decide for many clusters at once: a promotion opening a stage
when its gate opens. Requests made inside `bulk()` wait for one of the client's bulk slots; others
go straight to the connection pool, so under load a decision waits behind at most the bounded bulk
lane instead of behind every bulk request issued (ADR 0068, addendum 929c24d); while a decision is
in flight the lane narrows, so the next decision finds fewer beside it (ADR 0132).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
from collections.abc import Iterator

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


class Laned(httpx2.AsyncBaseTransport):
    """`inner` with at most `slots` bulk requests in flight at once, and at most `narrow` of them
    while a decision (any request not in bulk) is in flight: a slot is held until the response's
    headers arrive (the server has done its work by then). Bulk requests already out when a decision
    starts finish; new ones wait until it has its answer, so decisions that keep coming (a hundred
    promotions) keep the lane narrow and a stage of a thousand summaries with no decision beside it
    has every slot (ADR 0132). Waiting requests go out first come, first served."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, slots: int, narrow: int | None = None) -> None:
        if slots < 1 or (narrow is not None and narrow < 1):
            raise ValueError("a bulk lane needs at least one slot")
        self.inner = inner
        self.slots = slots
        self.narrow = min(slots, narrow or slots)
        self._bulk_in_flight = 0
        self._deciding = 0
        self._waiting: collections.deque[asyncio.Future[None]] = collections.deque()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if not in_bulk():
            return await self._decide(request)
        await self._take_slot()
        try:
            return await self.inner.handle_async_request(request)
        finally:
            self._bulk_in_flight -= 1
            self._hand_over()

    async def _decide(self, request: httpx2.Request) -> httpx2.Response:
        self._deciding += 1
        try:
            return await self.inner.handle_async_request(request)
        finally:
            self._deciding -= 1
            self._hand_over()

    def _room(self) -> int:
        return (self.narrow if self._deciding else self.slots) - self._bulk_in_flight

    async def _take_slot(self) -> None:
        if not self._waiting and self._room() > 0:
            self._bulk_in_flight += 1
            return
        granted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append(granted)
        try:
            await granted
        except asyncio.CancelledError:
            # A slot handed over just before the cancel is counted: give it to the next.
            if not granted.cancelled():
                self._bulk_in_flight -= 1
                self._hand_over()
            raise

    def _hand_over(self) -> None:
        """Wakes waiting requests, oldest first, while the lane has room; the slot is counted here,
        so no request that came later can take it first."""
        while self._waiting and self._room() > 0:
            granted = self._waiting.popleft()
            if granted.done():  # cancelled while it waited
                continue
            self._bulk_in_flight += 1
            granted.set_result(None)

    async def aclose(self) -> None:
        await self.inner.aclose()


__all__ = ["Laned", "bulk", "in_bulk"]

"""Two lanes for one client's requests: the bulk lane, bounded, and everything else, past it.

An API server without priority and fairness (or one that puts all of a controller's requests in one
flow) runs every request it gets at once and shares its CPU among them, so one request's wait grows
with how many are in flight. A controller makes most of its requests in bulk — one or two per
cluster of every rollout — and few that decide for many clusters at once: a promotion opening a stage
when its gate opens. Requests made inside `bulk()` wait for one of the client's bulk slots; others
go straight to the connection pool, so under load a decision waits behind at most the bounded bulk
lane instead of behind every bulk request issued (ADR 0068, addendum 929c24d).
"""

from __future__ import annotations

import asyncio
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
    """`inner` with at most `slots` bulk requests in flight at once: a slot is held until the
    response's headers arrive (the server has done its work by then)."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, slots: int) -> None:
        if slots < 1:
            raise ValueError("a bulk lane needs at least one slot")
        self.inner = inner
        self._slots = asyncio.Semaphore(slots)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if not in_bulk():
            return await self.inner.handle_async_request(request)
        async with self._slots:
            return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


__all__ = ["Laned", "bulk", "in_bulk"]

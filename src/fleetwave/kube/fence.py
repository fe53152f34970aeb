"""Fenced writes: a replica that may have lost its lease changes nothing until it has re-confirmed it.

A leader gives up its lease once it fails to renew for `renew_deadline`; but a process that was
paused (SIGSTOP, a frozen VM, a stop-the-world pause) resumes with its work in flight, and that work
may run before the elector notices the loss, while a follower already acts. So every mutating
request of every Kubernetes client (`client.async_client`'s transport) and every Helm command that
changes a member ask the fence first: the write goes out only while each lease this process holds
is within its renew deadline, measured on this process's monotonic clock (which keeps running
while the process is stopped). Past it, the write is refused with `FencedWrite` until the elector
renews again, or, if another replica took the lease, for good: the process then exits (ADR 0115).

Each manager with leader election has a fence of its own and runs under it (`enforced`): the
fence is carried in the context of every task the manager starts (informers, elector, controllers,
and the tasks those start, such as the Event writer), so requests and helm commands made for the
controller are checked and nothing else in the process is — a CLI command, the demo's own requests,
a test's client. Lease requests themselves run `exempt()`: they are how a lease is re-confirmed.
What remains is the interval between the check and the request's bytes leaving the process (no
await lies between them): a pause exactly there is not caught, as in every client-side lease; the
server has no fencing token for arbitrary objects.

The leader Lease may be renewed on a thread of its own (`runtime.lease_loop`, ADR 0140) while writes
are checked on the event loop's: the deadlines are replaced whole, never changed in place, so a
check reads one consistent set without a lock.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import time
from collections.abc import Callable, Iterator

import httpx2

log = logging.getLogger(__name__)

MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})

_EXEMPT: contextvars.ContextVar[bool] = contextvars.ContextVar("fleetwave_fence_exempt", default=False)
_ACTIVE: contextvars.ContextVar[Fence | None] = contextvars.ContextVar("fleetwave_fence", default=None)


class FencedWrite(RuntimeError):
    """A write refused because this replica's lease is not confirmed: it may no longer lead."""


class Fence:
    """Open while armed and every held lease is within its deadline; always open while not armed."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._armed = False
        self._deadlines: dict[str, float] = {}
        self.refused = 0  # writes refused since the process started (read by tests and the bench)
        self._refused_since_open = 0  # in the current closed spell: the first is a warning, the rest not

    def arm(self) -> None:
        """Leader election starts: closed until a lease is held."""
        self._armed = True
        self._deadlines = {}

    def disarm(self) -> None:
        """No election in this process (a manager without leader election): never fenced."""
        self._armed = False
        self._deadlines = {}

    def renewed(self, lease: str, valid_for: float) -> None:
        """`lease` was written by us; it is ours for `valid_for` more seconds of our clock."""
        self._deadlines = {**self._deadlines, lease: self._clock() + valid_for}
        if self._refused_since_open and self.is_open():
            log.info("lease confirmed again: writes go out (%d refused meanwhile)", self._refused_since_open)
            self._refused_since_open = 0

    def dropped(self, lease: str) -> None:
        """`lease` is no longer ours (lost, released, handed over)."""
        self._deadlines = {held: deadline for held, deadline in self._deadlines.items() if held != lease}

    def is_open(self) -> bool:
        if not self._armed:
            return True
        deadlines, now = self._deadlines, self._clock()
        return bool(deadlines) and all(now < deadline for deadline in deadlines.values())

    def time_left(self) -> float | None:
        """Seconds until the first held lease's deadline passes (negative once past); None while no
        lease is held or the fence is not armed, when a pause of this process endangers no lease. A
        long stop of the event loop (a full GC sweep) is taken only when it fits (`gc_freeze`)."""
        deadlines = self._deadlines
        if not self._armed or not deadlines:
            return None
        return min(deadlines.values()) - self._clock()

    def check(self, what: str) -> None:
        """Raise `FencedWrite` (and log it) unless a write may go out now."""
        if _EXEMPT.get() or self.is_open():
            return
        self.refused += 1
        self._refused_since_open += 1
        # One warning per closed spell: a stopping or paused replica refuses every write in flight
        # (dozens of Events at once), and one line says what happened; the rest are for debugging.
        level = logging.WARNING if self._refused_since_open == 1 else logging.DEBUG
        log.log(
            level,
            "fenced write refused: %s (the lease is not confirmed; this replica may not lead; "
            "further refusals until it is are logged at debug level)",
            what,
        )
        raise FencedWrite(f"{what} refused: this replica's lease is not confirmed")


@contextlib.contextmanager
def enforced(fence: Fence) -> Iterator[None]:
    """Writes made inside (and in tasks started inside) ask `fence` first."""
    token = _ACTIVE.set(fence)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def check(what: str) -> None:
    """Raise `FencedWrite` if the fence this code runs under (if any) refuses a write now."""
    active = _ACTIVE.get()
    if active is not None:
        active.check(what)


@contextlib.contextmanager
def exempt() -> Iterator[None]:
    """Requests made inside (and in tasks started inside) pass the fence: lease reads and writes."""
    token = _EXEMPT.set(True)
    try:
        yield
    finally:
        _EXEMPT.reset(token)


class Fenced(httpx2.AsyncBaseTransport):
    """`inner`, whose mutating requests ask the fence they are made under first. Never a URL in the
    message: the method is enough to act on and names no object of a tenant."""

    def __init__(self, inner: httpx2.AsyncBaseTransport) -> None:
        self.inner = inner

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if request.method in MUTATING:
            check(f"{request.method} request")
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


__all__ = ["MUTATING", "Fence", "Fenced", "FencedWrite", "check", "enforced", "exempt"]

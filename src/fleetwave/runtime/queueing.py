"""A keyed, de-duplicating work queue with delayed re-adds and per-key exponential backoff.

The queue is the runtime's only timer: gates and retries become `add_after`, so nothing polls.
Semantics follow client-go's workqueue: a key is never handed to two workers at once, and a key
re-added while it is being processed is handed out again once `done` is called.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

K = TypeVar("K", bound=Hashable)


class ShutDown(Exception):
    """Raised by `WorkQueue.get` once the queue has been shut down."""


class TimerHandle(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    """Monotonic seconds and one-shot callbacks; the event loop in production, a fake in tests."""

    def now(self) -> float: ...

    def call_at(self, when: float, callback: Callable[[], None]) -> TimerHandle: ...


class LoopClock:
    """The running event loop's clock (monotonic, the same one `asyncio.sleep` uses)."""

    def now(self) -> float:
        return asyncio.get_running_loop().time()

    def call_at(self, when: float, callback: Callable[[], None]) -> TimerHandle:
        return asyncio.get_running_loop().call_at(when, callback)


@dataclass(frozen=True, slots=True)
class Backoff:
    """Per-key exponential backoff: base, 2*base, 4*base, ... capped at `cap` seconds."""

    base: float = 0.005
    cap: float = 300.0

    def delay(self, failures: int) -> float:
        # Cap the exponent too: 2**1100 overflows a float long before any sane failure count.
        return min(self.base * 2.0 ** min(failures - 1, 64), self.cap)


class WorkQueue(Generic[K]):
    def __init__(self, *, clock: Clock | None = None, backoff: Backoff = Backoff()) -> None:
        self._clock: Clock = clock or LoopClock()
        self._backoff = backoff
        self._queue: collections.deque[K] = collections.deque()
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        self._timers: dict[K, tuple[float, TimerHandle]] = {}
        self._failures: dict[K, int] = {}
        self._ready_at: dict[K, float] = {}
        self._waits: dict[K, float] = {}
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._shut_down = False

    def __len__(self) -> int:
        """Keys ready to be handed out (not counting those waiting on a timer)."""
        return len(self._queue)

    @property
    def in_flight(self) -> int:
        """Keys handed out by `get` and not yet `done`."""
        return len(self._processing)

    @property
    def shutting_down(self) -> bool:
        return self._shut_down

    def add(self, key: K) -> None:
        if self._shut_down or key in self._dirty:
            return
        self._dirty.add(key)
        self._ready_at.setdefault(key, self._clock.now())
        if key in self._processing:
            return  # `done` re-queues it, so a key never runs twice at once
        self._queue.append(key)
        self._wake_one()

    def add_after(self, key: K, delay: float) -> None:
        """Add `key` after `delay` seconds; a pending earlier timer for the key wins."""
        if self._shut_down:
            return
        if delay <= 0:
            self.add(key)
            return
        when = self._clock.now() + delay
        pending = self._timers.get(key)
        if pending is not None:
            if pending[0] <= when:
                return
            pending[1].cancel()
        self._timers[key] = (when, self._clock.call_at(when, lambda: self._fire(key)))

    def add_rate_limited(self, key: K) -> None:
        failures = self._failures.get(key, 0) + 1
        self._failures[key] = failures
        self.add_after(key, self._backoff.delay(failures))

    def forget(self, key: K) -> None:
        """Reset the key's backoff (its pending timers stay)."""
        self._failures.pop(key, None)

    def num_requeues(self, key: K) -> int:
        return self._failures.get(key, 0)

    def pending_timer(self, key: K) -> float | None:
        """When the key's delayed add fires (clock seconds), if one is pending."""
        pending = self._timers.get(key)
        return pending[0] if pending else None

    async def get(self) -> K:
        """Wait for a ready key and mark it as processing; raise `ShutDown` once shut down."""
        while not self._queue:
            if self._shut_down:
                raise ShutDown
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                # A wake-up delivered to a cancelled getter must not strand a ready key.
                if waiter.done() and not waiter.cancelled():
                    self._wake_one()
                raise
        if self._shut_down:
            raise ShutDown
        key = self._queue.popleft()
        self._processing.add(key)
        self._dirty.discard(key)
        self._waits[key] = max(0.0, self._clock.now() - self._ready_at.pop(key, self._clock.now()))
        return key

    def waited(self, key: K) -> float:
        """Seconds the key spent ready before `get` handed it out; valid until `done`."""
        return self._waits.get(key, 0.0)

    def done(self, key: K) -> None:
        self._processing.discard(key)
        self._waits.pop(key, None)
        if key in self._dirty:
            self._queue.append(key)
            self._wake_one()

    def shutdown(self) -> None:
        """Stop handing out keys: pending timers are cancelled, every waiting `get` raises `ShutDown`."""
        self._shut_down = True
        for _, handle in self._timers.values():
            handle.cancel()
        self._timers.clear()
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)

    def _fire(self, key: K) -> None:
        self._timers.pop(key, None)
        self.add(key)

    def _wake_one(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

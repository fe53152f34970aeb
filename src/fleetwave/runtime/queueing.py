"""A keyed, de-duplicating work queue with delayed re-adds and per-key exponential backoff.

The queue is the runtime's only timer: gates and retries become `add_after`, so nothing polls.
Semantics follow client-go's workqueue: a key is never handed to two workers at once, and a key
re-added while it is being processed is handed out again once `done` is called.

Two lanes (ADR 0117): a key whose own timer fired (`add_after` in the `TIMER` lane — a gate's
deadline a pass asked for) is handed out before keys woken by events (`add`, the `EVENT` lane), FIFO
within each lane. A deadline is a promise made to a person ("the gate opens at 12:00:00"); an event
is news a pass would pick up a moment later anyway, and under load a few hundred of them wait
ahead. A key is in at most one lane: a timer firing for a key waiting in the event lane moves it.
"""

from __future__ import annotations

import asyncio
import collections
import enum
import itertools
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


class Lane(enum.IntEnum):
    """Where a ready key waits; a lower lane is served first."""

    TIMER = 0  # the key's own timer fired: a deadline a pass of it asked for
    EVENT = 1  # woken by a watch event, a retry after a failure, a resync


class WorkQueue(Generic[K]):
    def __init__(self, *, clock: Clock | None = None, backoff: Backoff = Backoff()) -> None:
        self._clock: Clock = clock or LoopClock()
        self._backoff = backoff
        # Each lane holds (key, ticket); `_ready` maps a waiting key to its lane and current ticket.
        # A key moved to the timer lane leaves a stale entry behind, skipped when it comes up: no
        # O(n) removal from the middle of a deque of (at scale) 100,000 summaries.
        self._lanes: tuple[collections.deque[tuple[K, int]], ...] = tuple(collections.deque() for _ in Lane)
        self._ready: dict[K, tuple[Lane, int]] = {}
        self._tickets = itertools.count()
        self._dirty: set[K] = set()
        self._urgent: set[K] = set()  # dirty keys whose own timer fired: they go in the timer lane
        self._processing: set[K] = set()
        # Per key at most one pending timer per lane: a deadline's (timer lane) is never displaced
        # by news folded into a later pass (event lane), which would serve the deadline's pass
        # behind other keys' news (ADR 0120).
        self._timers: dict[K, dict[Lane, tuple[float, TimerHandle]]] = {}
        self._failures: dict[K, int] = {}
        self._ready_at: dict[K, float] = {}
        self._waits: dict[K, float] = {}
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        # Getters that take only timer-lane keys (`get(timer_lane_only=True)`).
        self._timer_waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._shut_down = False

    def __len__(self) -> int:
        """Keys ready to be handed out (not counting those waiting on a timer)."""
        return len(self._ready)

    @property
    def in_flight(self) -> int:
        """Keys handed out by `get` and not yet `done`."""
        return len(self._processing)

    @property
    def shutting_down(self) -> bool:
        return self._shut_down

    def add(self, key: K, lane: Lane = Lane.EVENT) -> None:
        """Make `key` ready in `lane`; a key already ready (or due again after `done`) is not added
        twice, but moves to the timer lane if that is where it is asked for now."""
        if self._shut_down:
            return
        if key in self._dirty:
            if lane is Lane.TIMER and key not in self._urgent:
                self._urgent.add(key)
                if key in self._ready:
                    self._push(key)  # its event-lane entry goes stale
            return
        self._dirty.add(key)
        if lane is Lane.TIMER:
            self._urgent.add(key)
        self._ready_at.setdefault(key, self._clock.now())
        if key in self._processing:
            return  # `done` re-queues it, so a key never runs twice at once
        self._push(key)

    def add_after(self, key: K, delay: float, lane: Lane = Lane.TIMER) -> None:
        """Add `key` in `lane` after `delay` seconds; a pending earlier timer of the key in the same
        lane wins. The default lane is the timer lane: a delay a key's own pass asked for. A watch
        that folds a burst of events into one later pass asks for the event lane; its timer is
        dropped when the key's deadline comes first, and does not displace a later deadline."""
        if self._shut_down:
            return
        if delay <= 0:
            self.add(key, lane)
            return
        when = self._clock.now() + delay
        timers = self._timers.setdefault(key, {})
        deadline = timers.get(Lane.TIMER)
        if lane is Lane.EVENT and deadline is not None and deadline[0] <= when:
            return  # the deadline's pass comes first and reads the news too
        pending = timers.get(lane)
        if pending is not None:
            if pending[0] <= when:
                return
            pending[1].cancel()
        if lane is Lane.TIMER and (news := timers.get(Lane.EVENT)) is not None and news[0] >= when:
            news[1].cancel()  # folded into the deadline's pass
            del timers[Lane.EVENT]
        timers[lane] = (when, self._clock.call_at(when, lambda: self._fire(key, lane)))

    def add_rate_limited(self, key: K) -> None:
        """Retry `key` after its backoff, in the event lane: a retry is not a promised deadline, and a
        key failing in a loop must not go ahead of other keys' news."""
        failures = self._failures.get(key, 0) + 1
        self._failures[key] = failures
        self.add_after(key, self._backoff.delay(failures), Lane.EVENT)

    def forget(self, key: K) -> None:
        """Reset the key's backoff (its pending timers stay)."""
        self._failures.pop(key, None)

    def num_requeues(self, key: K) -> int:
        return self._failures.get(key, 0)

    def pending_timer(self, key: K) -> float | None:
        """When the key's delayed add fires (clock seconds), if one is pending."""
        timers = self._timers.get(key)
        return min(when for when, _ in timers.values()) if timers else None

    async def get(self, *, timer_lane_only: bool = False) -> K:
        """Wait for a ready key (the timer lane first) and mark it as processing; raise `ShutDown`
        once shut down. `timer_lane_only`: only a key in the timer lane (a worker kept for keys whose
        own timer fired, while the others are busy with news)."""
        waiters = self._timer_waiters if timer_lane_only else self._waiters
        # The timer lane holds no stale entries (a key enters it once, and leaves it only when handed
        # out), so its length is the count of its ready keys.
        while not (self._lanes[Lane.TIMER] if timer_lane_only else self._ready):
            if self._shut_down:
                raise ShutDown
            waiter = asyncio.get_running_loop().create_future()
            waiters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                # A wake-up delivered to a cancelled getter must not strand a ready key.
                if waiter.done() and not waiter.cancelled():
                    self._wake_one(Lane.TIMER if timer_lane_only else Lane.EVENT)
                raise
        if self._shut_down:
            raise ShutDown
        key = self._pop()
        self._processing.add(key)
        self._dirty.discard(key)
        self._urgent.discard(key)
        self._waits[key] = max(0.0, self._clock.now() - self._ready_at.pop(key, self._clock.now()))
        return key

    def waited(self, key: K) -> float:
        """Seconds the key spent ready before `get` handed it out; valid until `done`."""
        return self._waits.get(key, 0.0)

    def done(self, key: K) -> None:
        self._processing.discard(key)
        self._waits.pop(key, None)
        if key in self._dirty:
            self._push(key)

    def shutdown(self) -> None:
        """Stop handing out keys: pending timers are cancelled, every waiting `get` raises `ShutDown`."""
        self._shut_down = True
        for timers in self._timers.values():
            for _, handle in timers.values():
                handle.cancel()
        self._timers.clear()
        for waiter in (*self._waiters, *self._timer_waiters):
            if not waiter.done():
                waiter.set_result(None)
        self._waiters.clear()
        self._timer_waiters.clear()

    def _fire(self, key: K, lane: Lane) -> None:
        timers = self._timers.get(key)
        if timers is not None:
            timers.pop(lane, None)
            if not timers:
                del self._timers[key]
        self.add(key, lane)

    def _push(self, key: K) -> None:
        """Put a dirty key that is not in flight at the back of its lane."""
        lane = Lane.TIMER if key in self._urgent else Lane.EVENT
        ticket = next(self._tickets)
        self._ready[key] = (lane, ticket)
        self._lanes[lane].append((key, ticket))
        self._wake_one(lane)

    def _pop(self) -> K:
        """The first ready key of the first lane that has one (`_ready` is not empty)."""
        for lane in self._lanes:
            while lane:
                key, ticket = lane.popleft()
                if self._ready.get(key, (None, None))[1] == ticket:
                    del self._ready[key]
                    return key
        raise AssertionError("a ready key is in no lane")

    def _wake_one(self, lane: Lane) -> None:
        """Wake one getter for a key made ready in `lane`: a timer-lane key wakes a getter kept for
        that lane first; any other getter takes any key."""
        for waiters in (self._timer_waiters, self._waiters) if lane is Lane.TIMER else (self._waiters,):
            while waiters:
                waiter = waiters.popleft()
                if not waiter.done():
                    waiter.set_result(None)
                    return

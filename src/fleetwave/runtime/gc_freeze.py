"""Short full collections for a large heap: what has lived a while is frozen out of the cyclic GC.

A full collection walks every object the GC tracks, and the event loop stops meanwhile: at 1,000
member clusters the informer caches alone are millions of objects. Once a minute a full collection
frees the cyclic garbage made since the last round, and the objects still alive are moved to the
GC's permanent generation (`gc.freeze`), so collections walk only what was allocated since. Frozen
objects are still freed as soon as nothing refers to them; only reference cycles among them wait,
for the sweep (unfreeze, one full collection, freeze again), and the loop pays one long pause per
sweep instead of one every time the heap grows by a quarter. Sweeps come every half hour while they
find such cycles; a sweep that finds (almost) none doubles the wait for the next, up to four hours,
since its pause buys nothing then (ADR 0142).

Between rounds the GC makes no full collection of its own (ADR 0122): under load it made
one every few seconds, each walking all that had survived since the last freeze (~130 ms at 100
rollouts over 100 clusters), and a gate due meanwhile waited for it. The round's collection does
that walk once a minute.

A sweep's pause grows with the heap (4.2 s at 51,000 ClusterSummaries), and a leader whose loop
stands still cannot renew its lease (ADR 0139). So a sweep is foretold from the heap's allocated
blocks and what the last sweep took per block, and taken only when it fits in what the lease
leaves, just after a renewal; one that cannot fit is put off, and says so once per period. Memory
held by cycles among frozen objects is bounded by the sweep period while sweeps fit.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger(__name__)

FREEZE_EVERY = 60.0
SWEEP_EVERY = 1800.0
# The longest wait between sweeps that keep finding (almost) no cycles among long-lived objects.
SWEEP_EVERY_MOST = 4 * 3600.0
# Fewer objects than this freed by a sweep (~1 MB at ~100 bytes each) is "almost none": the next
# waits twice as long. More, and the next comes after the base period again.
FEW_FREED = 10_000
# The oldest generation's threshold while rounds run: collections of the middle generation between
# two automatic full collections. Under load there are a few per second, so a round comes first.
DEFERRED_FULL = 100_000
# What the renewal after a sweep may take: 1.0-1.8 s under load at 51,000 summaries (ADR 0138).
RENEWAL_RESERVE = 3.0
# How long a due sweep waits for the moment right after a renewal, when the lease leaves the most
# time: more than one renewal period (2 s at the default --lease-duration of 15 s).
SWEEP_WAIT = 5.0
POLL = 0.05
# A sweep's seconds per allocated block until one is measured: what a sweep took in
# `bench_gc_sweep_rate.py` on this project's 2-core machine while a 1,000-cluster fleet ran beside
# it, several times its rate on an idle machine (ADR 0139). The heap is counted in pymalloc's
# blocks (`sys.getallocatedblocks`, ~2 ms for a 2 GiB heap), not in objects the GC tracks:
# `gc.get_freeze_count()` walks the whole frozen list, over a second at that size.
PER_BLOCK_UNTIL_MEASURED = 400e-9
# Sweeps over fewer blocks say little about the rate per block.
MIN_SAMPLE = 100_000

TimeLeft = Callable[[], float | None]


def _no_lease() -> float | None:
    return None


@dataclass(slots=True)
class PauseForecast:
    """A sweep's pause from the heap's allocated blocks and what the last sweep took per block."""

    per_block: float = PER_BLOCK_UNTIL_MEASURED

    def observed(self, seconds: float, blocks: int) -> None:
        if blocks >= MIN_SAMPLE:
            self.per_block = seconds / blocks

    def sweep_seconds(self, blocks: int) -> float:
        return blocks * self.per_block


def next_sweep_period(period: float, freed: int, *, base: float, longest: float) -> float:
    """The wait before the next sweep, given what the last one freed: doubled (up to `longest`)
    when it found almost nothing, `base` again when it found cycles worth the pause."""
    if freed >= FEW_FREED:
        return base
    return min(max(period, base) * 2, max(longest, base))


def fits(pause: float, time_left: float | None) -> bool:
    """Whether a pause leaves the lease time for the renewal after it; always, while no lease is held."""
    return time_left is None or pause + RENEWAL_RESERVE <= time_left


class _Rounds:
    """The rounds' state: when the last sweep ran, what it took per block, what was said."""

    def __init__(self, *, every: float, clock: Callable[[], float], time_left: TimeLeft, wait: float) -> None:
        self.forecast = PauseForecast()
        self._every, self._clock, self._time_left, self._wait = every, clock, time_left, wait
        self._base = every
        self._swept = clock()
        self._said_put_off = False  # in this period

    def sweep_due(self) -> bool:
        return self._clock() - self._swept >= self._every

    async def sweep_fits(self) -> bool:
        """Wait up to `wait` for a moment the lease leaves room for the sweep (right after a renewal);
        False, said once a period, when none came."""
        blocks = sys.getallocatedblocks()
        pause = self.forecast.sweep_seconds(blocks)
        loop = asyncio.get_running_loop()
        give_up = loop.time() + self._wait
        while not fits(pause, self._time_left()):
            if loop.time() >= give_up:
                self._say_put_off(pause, blocks)
                return False
            await asyncio.sleep(POLL)
        return True

    def collect(self) -> None:
        """All but what is frozen, then freeze what survived."""
        gc.collect()
        gc.freeze()

    def sweep(self) -> None:
        """Everything, frozen or not, then freeze what survived."""
        blocks = sys.getallocatedblocks()
        foretold = self.forecast.sweep_seconds(blocks)
        gc.unfreeze()
        self._swept, self._said_put_off = self._clock(), False
        started = time.perf_counter()
        freed = gc.collect()
        seconds = time.perf_counter() - started
        gc.freeze()
        self.forecast.observed(seconds, blocks)
        self._every = next_sweep_period(self._every, freed, base=self._base, longest=SWEEP_EVERY_MOST)
        log.info(
            "GC sweep: %d unreachable objects freed in %.2fs (foretold %.2fs); %d blocks allocated "
            "before; the next in %.0f min",
            freed,
            seconds,
            foretold,
            blocks,
            self._every / 60,
        )

    def _say_put_off(self, pause: float, blocks: int) -> None:
        if self._said_put_off:
            return
        self._said_put_off = True
        log.info(
            "GC sweep put off: it would stop the event loop for about %.1fs (%d blocks allocated), more "
            "than the leader's lease leaves; reference cycles among long-lived objects wait for it "
            "(a longer --lease-duration lets it run)",
            pause,
            blocks,
        )


async def keep_long_lived_frozen(
    *,
    freeze_every: float = FREEZE_EVERY,
    sweep_every: float = SWEEP_EVERY,
    clock: Callable[[], float] = time.monotonic,
    time_left: TimeLeft = _no_lease,
    sweep_wait: float = SWEEP_WAIT,
) -> None:
    """Run until cancelled; everything frozen is handed back to the GC, and its thresholds restored,
    on the way out. `time_left`: seconds the leader's lease leaves before its deadline
    (`Fence.time_left`), None while no lease is held."""
    rounds = _Rounds(every=sweep_every, clock=clock, time_left=time_left, wait=sweep_wait)
    thresholds = gc.get_threshold()
    gc.set_threshold(thresholds[0], thresholds[1], DEFERRED_FULL)
    try:
        while True:
            await asyncio.sleep(freeze_every)
            if rounds.sweep_due() and await rounds.sweep_fits():
                rounds.sweep()
            else:
                rounds.collect()
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()

"""Freezing the long-lived heap: frozen while running, cycles among frozen objects freed at a sweep,
everything handed back when it stops."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import weakref

import pytest

from fleetwave.runtime import gc_freeze


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


async def test_objects_are_frozen_while_it_runs_and_unfrozen_after() -> None:
    task = asyncio.create_task(gc_freeze.keep_long_lived_frozen(freeze_every=0.01, sweep_every=3600))
    await asyncio.sleep(0.05)
    assert gc.get_freeze_count() > 0
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert gc.get_freeze_count() == 0


async def test_a_cycle_that_was_frozen_is_freed_by_the_next_sweep_not_before() -> None:
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    gone = weakref.ref(a)
    task = asyncio.create_task(gc_freeze.keep_long_lived_frozen(freeze_every=0.01, sweep_every=3600))
    await asyncio.sleep(0.05)  # the cycle is frozen now
    del a, b
    gc.collect()
    assert gone() is not None  # frozen: no collection sees it
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    gc.collect()
    assert gone() is None  # unfrozen on the way out, and collected


async def test_a_sweep_frees_frozen_cycles_while_running() -> None:
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    gone = weakref.ref(a)
    gc.freeze()  # as a previous round would have
    del a, b
    task = asyncio.create_task(gc_freeze.keep_long_lived_frozen(freeze_every=0.01, sweep_every=0.0))
    try:
        await asyncio.sleep(0.05)
        assert gone() is None
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        gc.unfreeze()


async def test_a_cycle_that_became_garbage_after_surviving_a_full_collection_is_freed_not_frozen() -> None:
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    gone = weakref.ref(a)
    gc.collect()  # it survives: in the oldest generation now
    del a, b
    task = asyncio.create_task(gc_freeze.keep_long_lived_frozen(freeze_every=0.01, sweep_every=3600))
    try:
        await asyncio.sleep(0.05)
        assert gone() is None  # a round's collection reached it before the freeze
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_the_gc_makes_no_full_collection_of_its_own_while_rounds_run() -> None:
    before = gc.get_threshold()
    task = asyncio.create_task(gc_freeze.keep_long_lived_frozen(freeze_every=3600, sweep_every=3600))
    await asyncio.sleep(0)
    assert gc.get_threshold() == (before[0], before[1], gc_freeze.DEFERRED_FULL)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert gc.get_threshold() == before


def test_a_sweep_is_foretold_from_the_last_one_measured() -> None:
    forecast = gc_freeze.PauseForecast()
    assert forecast.sweep_seconds(10_000_000) == pytest.approx(
        10_000_000 * gc_freeze.PER_BLOCK_UNTIL_MEASURED
    )
    forecast.observed(0.001, 1_000)
    assert forecast.per_block == gc_freeze.PER_BLOCK_UNTIL_MEASURED  # too small a heap to say anything
    forecast.observed(3.0, 30_000_000)
    assert forecast.sweep_seconds(60_000_000) == pytest.approx(6.0)


def test_a_pause_fits_when_the_renewal_after_it_still_has_time() -> None:
    assert gc_freeze.fits(60.0, None)  # no lease held: nothing to lose
    assert gc_freeze.fits(5.0, 5.0 + gc_freeze.RENEWAL_RESERVE)
    assert not gc_freeze.fits(5.1, 5.0 + gc_freeze.RENEWAL_RESERVE)


async def _cycle_after(time_left: gc_freeze.TimeLeft, *, wait: float, seconds: float) -> bool:
    """Whether a cycle frozen before a sweeping task starts is still alive `seconds` later."""
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    gone = weakref.ref(a)
    gc.freeze()
    del a, b
    task = asyncio.create_task(
        gc_freeze.keep_long_lived_frozen(
            freeze_every=0.01, sweep_every=0.0, time_left=time_left, sweep_wait=wait
        )
    )
    try:
        await asyncio.sleep(seconds)
        return gone() is not None
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        gc.unfreeze()
        gc.collect()


async def test_a_sweep_the_lease_has_no_room_for_is_put_off_and_said_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger=gc_freeze.__name__)
    assert await _cycle_after(lambda: 1.0, wait=0.02, seconds=0.2)  # less than the renewal reserve
    put_off = [r for r in caplog.records if "GC sweep put off" in r.getMessage()]
    assert len(put_off) == 1
    assert "--lease-duration" in put_off[0].getMessage()


async def test_a_due_sweep_waits_for_the_moment_after_a_renewal(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=gc_freeze.__name__)
    answers = iter([1.0] * 5)  # a few polls of a lease about to be renewed, then renewed

    def time_left() -> float:
        return next(answers, 9.0)

    assert not await _cycle_after(time_left, wait=5.0, seconds=0.5)
    assert not [r for r in caplog.records if "GC sweep put off" in r.getMessage()]  # it waited, in the round
    assert [r for r in caplog.records if r.getMessage().startswith("GC sweep: ")]


def test_a_sweep_that_frees_almost_nothing_doubles_the_wait_up_to_the_longest() -> None:
    period = gc_freeze.next_sweep_period
    assert period(1800, 0, base=1800, longest=14_400) == 3600
    assert period(3600, gc_freeze.FEW_FREED - 1, base=1800, longest=14_400) == 7200
    assert period(14_400, 0, base=1800, longest=14_400) == 14_400
    assert period(7200, gc_freeze.FEW_FREED, base=1800, longest=14_400) == 1800


def _garbage_cycles(objects: int) -> None:
    for _ in range(objects // 2):
        a, b = _Node(), _Node()
        a.other, b.other = b, a


def test_the_sweeps_census_sets_when_the_next_sweep_is_due() -> None:
    now = [0.0]
    rounds = gc_freeze._Rounds(every=100.0, clock=lambda: now[0], time_left=lambda: None, wait=0.0)
    try:
        gc.collect()  # nothing cyclic left for the sweep to find
        rounds.sweep()
        now[0] = 150.0
        assert not rounds.sweep_due(), "a sweep that found nothing waits twice as long for the next"
        now[0] = 200.0
        assert rounds.sweep_due()
        gc.disable()  # so that no automatic collection frees the cycles before the sweep
        _garbage_cycles(2 * gc_freeze.FEW_FREED)
        rounds.sweep()
        now[0] = 300.0
        assert rounds.sweep_due(), "one that found cycles brings the base period back"
    finally:
        gc.enable()
        gc.unfreeze()

"""Freezing the long-lived heap: frozen while running, cycles among frozen objects freed at a sweep,
everything handed back when it stops."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import weakref

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

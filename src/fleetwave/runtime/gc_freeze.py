"""Short full collections for a large heap: what has lived a while is frozen out of the cyclic GC.

A full collection walks every object the GC tracks, and the event loop stops meanwhile: at 1,000
member clusters the informer caches alone are millions of objects. Once a minute a full collection
frees the cyclic garbage made since the last round, and the objects still alive are moved to the
GC's permanent generation (`gc.freeze`), so collections walk only what was allocated since. Frozen
objects are still freed as soon as nothing refers to them; only reference cycles among them wait,
for the sweep every half hour (unfreeze, one full collection, freeze again): memory held by such
cycles is bounded by that period, and the loop pays one long pause per sweep instead of one every
time the heap grows by a quarter.

Between rounds the GC makes no full collection of its own (ADR 0122): under load it made
one every few seconds, each walking all that had survived since the last freeze (~130 ms at 100
rollouts over 100 clusters), and a gate due meanwhile waited for it. The round's collection does
that walk once a minute.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Callable

FREEZE_EVERY = 60.0
SWEEP_EVERY = 1800.0
# The oldest generation's threshold while rounds run: collections of the middle generation between
# two automatic full collections. Under load there are a few per second, so a round comes first.
DEFERRED_FULL = 100_000


async def keep_long_lived_frozen(
    *,
    freeze_every: float = FREEZE_EVERY,
    sweep_every: float = SWEEP_EVERY,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Run until cancelled; everything frozen is handed back to the GC, and its thresholds restored,
    on the way out."""
    swept, thresholds = clock(), gc.get_threshold()
    gc.set_threshold(thresholds[0], thresholds[1], DEFERRED_FULL)
    try:
        while True:
            await asyncio.sleep(freeze_every)
            if clock() - swept >= sweep_every:
                gc.unfreeze()
                swept = clock()
            gc.collect()  # all but what is frozen: the sweep's walks everything
            gc.freeze()
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()

"""Short full collections for a large heap: what has lived a while is frozen out of the cyclic GC.

A full collection walks every object the GC tracks, and the event loop stops meanwhile: at 1,000
member clusters the informer caches alone are millions of objects. Once a minute the objects alive
then are moved to the GC's permanent generation (`gc.freeze`, after a young collection so that
fresh garbage is not kept), so automatic collections walk only what was allocated since. Frozen
objects are still freed as soon as nothing refers to them; only reference cycles among them wait,
for the sweep every half hour (unfreeze, one full collection, freeze again): memory held by such
cycles is bounded by that period, and the loop pays one long pause per sweep instead of one every
time the heap grows by a quarter.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Callable

FREEZE_EVERY = 60.0
SWEEP_EVERY = 1800.0


async def keep_long_lived_frozen(
    *,
    freeze_every: float = FREEZE_EVERY,
    sweep_every: float = SWEEP_EVERY,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Run until cancelled; everything frozen is handed back to the GC on the way out."""
    swept = clock()
    try:
        while True:
            await asyncio.sleep(freeze_every)
            if clock() - swept >= sweep_every:
                gc.unfreeze()
                gc.collect()
                swept = clock()
            else:
                gc.collect(1)
            gc.freeze()
    finally:
        gc.unfreeze()

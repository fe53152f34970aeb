"""How late the event loop runs what is due: every reconcile, watch event and timer shares one loop,
so when it is busy a gate that opened waits for the CPU, not for the API server. Measured by a task
that sleeps a fixed interval and records how much longer than that the sleep took."""

from __future__ import annotations

import asyncio
from typing import Protocol

INTERVAL = 0.25  # seconds between samples: cheap (4 wakeups a second), fine enough for a p99


class Observer(Protocol):
    def observe(self, amount: float) -> None: ...


async def watch(lag: Observer, *, interval: float = INTERVAL) -> None:
    """Record the loop's lag into `lag` until cancelled."""
    loop = asyncio.get_running_loop()
    while True:
        start = loop.time()
        await asyncio.sleep(interval)
        lag.observe(max(0.0, loop.time() - start - interval))

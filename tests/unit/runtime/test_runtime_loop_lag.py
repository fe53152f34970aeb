"""The loop-lag sampler: a loop blocked by synchronous work shows up as lag, an idle one does not."""

from __future__ import annotations

import asyncio
import contextlib
import time

from fleetwave.runtime import loop_lag


class _Samples:
    def __init__(self) -> None:
        self.values: list[float] = []
        self.taken = asyncio.Event()

    def observe(self, amount: float) -> None:
        self.values.append(amount)
        self.taken.set()


async def _sampled(blocking: float) -> list[float]:
    samples = _Samples()
    task = asyncio.create_task(loop_lag.watch(samples, interval=0.02))
    await asyncio.sleep(0.005)  # the sampler starts its first sleep
    time.sleep(blocking)  # noqa: ASYNC251 - synchronous work holding the loop, as a long pass would
    await samples.taken.wait()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return samples.values


async def test_a_blocked_loop_is_recorded_as_lag() -> None:
    values = await _sampled(blocking=0.2)
    # It was due 0.02 s after it started and woke only after the 0.2 s block.
    assert values[0] >= 0.15


async def test_lag_is_never_negative() -> None:
    values = await _sampled(blocking=0.0)
    assert all(v >= 0.0 for v in values)

"""bench/loop_stalls.py: what it learns from the loop's lag sampler and the lease attempts it times."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from types import ModuleType, SimpleNamespace

import pytest


class _Observed:
    def __init__(self) -> None:
        self.amounts: list[float] = []

    def observe(self, amount: float) -> None:
        self.amounts.append(amount)


def test_each_lag_sample_marks_that_the_loop_ran_and_still_reaches_the_metric(
    bench_module: Callable[[str], ModuleType],
) -> None:
    stalls = bench_module("loop_stalls")
    stalls._beat[0] = 0.0
    metric = _Observed()

    async def sample_twice() -> None:
        async def two_samples(lag: object, **_: object) -> None:
            for amount in (0.01, 0.02):
                lag.observe(amount)  # type: ignore[attr-defined]
                await asyncio.sleep(0)

        await stalls._watched(two_samples)(metric)

    asyncio.run(sample_twice())
    assert metric.amounts == [0.01, 0.02]
    assert stalls._beat[0] > 0.0  # the watchdog starts judging only once the sampler ran


def test_a_lease_attempt_over_a_second_is_logged_with_its_duration(
    bench_module: Callable[[str], ModuleType],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stalls = bench_module("loop_stalls")
    readings = iter([100.0, 101.5, 200.0, 200.2])  # a slow attempt, then a quick one
    monkeypatch.setattr(stalls, "time", SimpleNamespace(monotonic=lambda: next(readings)))

    async def attempt(_self: object) -> str:
        return "held"

    timed = stalls._timed(attempt)
    with caplog.at_level(logging.WARNING, logger="fleetwave.bench.stalls"):
        assert asyncio.run(timed(None)) == "held"
        assert asyncio.run(timed(None)) == "held"
    assert [r.getMessage() for r in caplog.records] == ["lease attempt took 1.50 s"]

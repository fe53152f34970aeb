"""Run the controller with its event loop watched from a thread: when the loop has not run its lag
sampler (`runtime.loop_lag`, every 0.25 s) for STALL seconds, the main thread's stack is logged, and
again every second the stall lasts; and every leader-lease attempt that took over a second is logged
with its duration. Tells a loop that stopped apart from an API server slow to answer (a lost lease
under load is one or the other). The GC sweeps' own lines (`runtime.gc_freeze`) are logged too.

    FLEETWAVE_BENCH_ENTRY=bench/loop_stalls.py PYTHONPATH=src .venv/bin/python bench/bench_scale.py \
        --sizes 1000 --servers 20 --promotions 100 --staged-runs 0 --ratio-trials 0 --keep-logs DIR
"""

from __future__ import annotations

import logging
import runpy
import sys
import threading
import time
import traceback
from typing import Any

from fleetwave.runtime import gc_freeze, leader, loop_lag

log = logging.getLogger("fleetwave.bench.stalls")

STALL = 1.5  # seconds without a sample: six times the sampler's interval
_beat = [0.0]  # when the sampler last ran (0: not yet started)


class _Beating:
    """The lag observer, which also marks that the loop ran."""

    def __init__(self, inner: loop_lag.Observer) -> None:
        self.inner = inner

    def observe(self, amount: float) -> None:
        _beat[0] = time.monotonic()
        self.inner.observe(amount)


def _watched(watch: Any) -> Any:
    async def beating(lag: loop_lag.Observer, **kwargs: Any) -> None:
        await watch(_Beating(lag), **kwargs)

    return beating


def _timed(attempt: Any) -> Any:
    async def timed(self: leader.LeaderElector) -> Any:
        started = time.monotonic()
        try:
            return await attempt(self)
        finally:
            took = time.monotonic() - started
            if took > 1.0:
                log.warning("lease attempt took %.2f s", took)

    return timed


def _watchdog(main: int) -> None:
    logged = 0.0
    while True:
        time.sleep(0.2)
        stalled = time.monotonic() - _beat[0]
        if not _beat[0] or stalled < STALL or time.monotonic() - logged < 1.0:
            continue
        logged = time.monotonic()
        frame = sys._current_frames().get(main)
        stack = "".join(traceback.format_stack(frame, limit=25)) if frame is not None else "?"
        log.warning("event loop stalled for %.1f s; main thread at:\n%s", stalled, stack)


def main() -> None:
    loop_lag.watch = _watched(loop_lag.watch)
    leader.LeaderElector.try_acquire_or_renew = _timed(  # type: ignore[method-assign]
        leader.LeaderElector.try_acquire_or_renew
    )
    threading.Thread(target=_watchdog, args=(threading.get_ident(),), daemon=True).start()
    # What each GC sweep freed and took, or why it was put off (ADR 0139), under a WARNING-level run.
    logging.getLogger(gc_freeze.__name__).setLevel(logging.INFO)
    sys.argv = ["fleetwave", *sys.argv[1:]]
    runpy.run_module("fleetwave", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()

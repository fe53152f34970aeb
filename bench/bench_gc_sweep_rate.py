"""What a GC sweep costs per allocated block, and what counting the heap costs (ADR 0139).

    .venv/bin/python bench/bench_gc_sweep_rate.py [--entries 1000000] [--trials 5]

The controller foretells a GC sweep's pause (unfreeze, one full collection, freeze) from the
heap's allocated blocks and, until it has measured a sweep, a fixed seconds-per-block
(`runtime/gc_freeze.py`, `PER_BLOCK_UNTIL_MEASURED`). This builds a heap of `--entries` small nested
objects shaped like informer-cache entries, freezes it, and per trial times a sweep, and the two
ways to count the heap: `sys.getallocatedblocks()` (what the controller reads) and
`gc.get_freeze_count()` (which walks the frozen list). Prints the medians.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any


def _entries(count: int) -> list[dict[str, Any]]:
    return [
        {"metadata": {"name": str(i), "labels": {"a": "b"}}, "spec": {"items": [i, i]}} for i in range(count)
    ]


def _timed(call: Callable[[], object]) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def trial() -> tuple[float, float, float, float]:
    """(sweep ns per block, sweep ns per tracked object, blocks counted in s, frozen counted in s)."""
    blocks, frozen = sys.getallocatedblocks(), gc.get_freeze_count()
    count_blocks, count_frozen = _timed(sys.getallocatedblocks), _timed(gc.get_freeze_count)
    gc.unfreeze()
    sweep = _timed(gc.collect)
    gc.freeze()
    return sweep / blocks * 1e9, sweep / frozen * 1e9, count_blocks, count_frozen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--trials", type=int, default=5)
    args = parser.parse_args()
    gc.disable()  # only the collections timed here
    heap = _entries(args.entries)
    gc.collect()
    gc.freeze()
    per_block, per_object, count_blocks, count_frozen = (
        statistics.median(column) for column in zip(*(trial() for _ in range(args.trials)), strict=True)
    )
    blocks, frozen = sys.getallocatedblocks(), gc.get_freeze_count()
    print(f"{args.entries:,} entries: {blocks:,} blocks allocated, {frozen:,} objects frozen")
    print(f"sweep: {per_block:.0f} ns per allocated block, {per_object:.0f} ns per tracked object")
    print(f"counting: blocks {count_blocks * 1e3:.2f} ms, frozen objects {count_frozen * 1e3:.1f} ms")
    del heap


if __name__ == "__main__":
    main()

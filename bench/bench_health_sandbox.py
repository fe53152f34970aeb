"""Cost of isolating health checks: the same check on a real member, in-process (a worker thread, as
before ADR 0041) vs in the sandbox pool (a warm worker process), side by side in one run.

Reports p50/p99 per check for a readiness-only judgement and for one Lua + one CEL check, and the
ratio sandbox/in-process. Run: .venv/bin/python bench/bench_health_sandbox.py [--trials 60]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from fleetwave.api.sveltos import ValidateHealth
from fleetwave.health import cluster_check
from fleetwave.local import binaries, fleet
from fleetwave.sandbox.pool import Budget, CheckPool

LUA = "function evaluate() return {healthy = obj.metadata.name == 'default'} end"
OBJECTS = [("v1", "Namespace", None, "default")]
CHECKS = [
    ValidateHealth.model_validate(
        {
            "name": "lua-and-cel",
            "featureID": "Resources",
            "version": "v1",
            "kind": "Namespace",
            "resourceName": "default",
            "script": LUA,
            "evaluateCEL": [{"name": "named", "rule": "resource.metadata.name == 'default'"}],
        }
    )
]


async def _timed(trials: int, call: Callable[[], Awaitable[object]]) -> list[float]:
    await call()  # warm caches and connections
    out = []
    for _ in range(trials):
        start = time.perf_counter()
        await call()
        out.append((time.perf_counter() - start) * 1000)
    return out


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def measure(kubeconfig: bytes, trials: int) -> None:
    pool = CheckPool(Budget(workers=1))
    await pool.start()
    try:
        for label, checks in (("readiness only", []), ("readiness + Lua + CEL", CHECKS)):

            async def in_thread(c: list[ValidateHealth] = checks) -> object:
                return await asyncio.to_thread(cluster_check.judge, kubeconfig, c, OBJECTS)

            async def in_sandbox(c: list[ValidateHealth] = checks) -> object:
                return await pool.check(kubeconfig, c, OBJECTS)

            inproc = await _timed(trials, in_thread)
            boxed = await _timed(trials, in_sandbox)
            ratio = statistics.median(boxed) / statistics.median(inproc)
            print(
                f"{label:24s} in-process p50 {_p(inproc, 0.5):6.1f} ms p99 {_p(inproc, 0.99):6.1f} ms | "
                f"sandbox p50 {_p(boxed, 0.5):6.1f} ms p99 {_p(boxed, 0.99):6.1f} ms | ratio {ratio:.2f}"
            )
    finally:
        await pool.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=60)
    args = parser.parse_args()
    bins = binaries.ensure()
    with tempfile.TemporaryDirectory(prefix="fleetwave-bench-sandbox-") as tmp:
        state_dir = Path(tmp) / "fleet"
        state = fleet.up(
            state_dir,
            members=fleet.default_member_labels(1),
            now=dt.datetime.now(dt.UTC),
            bin_dir=bins.directory,
        )
        try:
            asyncio.run(measure(Path(state.members[0].kubeconfig).read_bytes(), args.trials))
        finally:
            fleet.down(state_dir)


if __name__ == "__main__":
    main()

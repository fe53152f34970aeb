"""Benchmark of the pure decision engine on a simulated fleet of 10,000 clusters in 5 stages.

Measures: time to plan (freeze + full simulated timeline), time of one decision step mid-rollout,
and peak memory (tracemalloc peak during the runs, plus the process's peak RSS).
Goals: plan < 1 s, step < 50 ms, < 500 MB.  Run: .venv/bin/python bench/bench_engine.py
"""

from __future__ import annotations

import resource
import statistics
import sys
import time
import tracemalloc
from datetime import UTC, datetime, timedelta

from fleetwave.core import batching, engine, timeline
from fleetwave.core import model as m

CLUSTERS = 10_000
STAGES = ("canary", "dev", "staging", "prod-eu", "prod-us")
T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)


def build() -> tuple[m.RolloutSpec, m.Fleet]:
    fleet = m.Fleet.of(
        m.Cluster(
            f"cluster-{i:05d}", {"env": STAGES[i % len(STAGES)], "wave": str(i % 13), "region": f"r{i % 7}"}
        )
        for i in range(CLUSTERS)
    )
    stages = tuple(
        m.StageSpec(
            name,
            m.Selector(match_expressions=(m.Requirement("env", m.Operator.IN, (name,)),)),
            sorting_key="wave",
            max_in_flight=m.MaxInFlight(10, percent=True),
            after=(
                m.Delay(timedelta(minutes=30)),
                m.HealthChecks(("smoke",)),
                m.Window("0 6 * * 1-5", "0 18 * * 1-5", tz="Europe/Berlin"),
                m.Approval(f"{name}-ok"),
            ),
        )
        for name in STAGES
    )
    revision = m.Revision("content-v1", batching.compute_stages_hash(stages))
    return m.RolloutSpec("bench", revision, stages, progress_deadline=timedelta(hours=2)), fleet


def bench_plan(spec: m.RolloutSpec, fleet: m.Fleet) -> tuple[float, timeline.Timeline]:
    assumptions = timeline.Assumptions(delivery_time=timedelta(minutes=3), approve_on_request=True)
    started = time.perf_counter()
    tl = timeline.simulate(spec, fleet, T0, assumptions)
    return time.perf_counter() - started, tl


def mid_rollout_observed(spec: m.RolloutSpec, fleet: m.Fleet) -> tuple[m.Observed, datetime]:
    """Stages 0-1 done, stage 2 ('staging') half delivered with a full window in flight."""
    now = T0
    status = engine.step(spec, fleet, m.Observed(), now).status
    done = m.Delivery(m.DeliveryPhase.APPLIED, ready=True)
    delivery: dict[str, m.Delivery] = {}
    approvals = {f"{s}-ok": T0 for s in STAGES}
    health = {(s, "smoke"): m.HealthVerdict(True) for s in STAGES}
    while status.current < 2 or status.stages[2].completed < len(status.stages[2].clusters) // 2:
        for stage in status.stages:
            for name in stage.started:
                delivery[name] = done
        now += timedelta(hours=1)
        status = engine.step(spec, fleet, m.Observed(delivery, health, approvals, status), now).status
    applying = m.Delivery(m.DeliveryPhase.APPLYING)
    for name in status.stages[2].started:
        delivery.setdefault(name, applying)
    return m.Observed(delivery, health, approvals, status), now


def bench_step(spec: m.RolloutSpec, fleet: m.Fleet, rounds: int = 50) -> list[float]:
    observed, now = mid_rollout_observed(spec, fleet)
    timings = []
    for _ in range(rounds):
        started = time.perf_counter()
        engine.step(spec, fleet, observed, now)
        timings.append(time.perf_counter() - started)
    return timings


def main() -> int:
    build_started = time.perf_counter()
    spec, fleet = build()
    build_s = time.perf_counter() - build_started
    # Timings run untraced (tracemalloc roughly doubles allocation cost); memory is a separate pass.
    plan_s, tl = bench_plan(spec, fleet)
    steps = bench_step(spec, fleet)
    tracemalloc.start()
    bench_plan(spec, fleet)
    bench_step(spec, fleet, rounds=3)
    _, peak_traced = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    step_ms = statistics.median(steps) * 1000
    print(f"fleet: {CLUSTERS} clusters, {len(STAGES)} stages (built in {build_s:.3f} s)")
    print(
        f"plan (freeze + full simulated timeline): {plan_s:.3f} s"
        f"  [{tl.steps} engine steps, outcome {tl.outcome}]"
    )
    print(f"  simulated finish: {tl.finished_at}")
    print(f"one decision step mid-rollout: median {step_ms:.2f} ms, max {max(steps) * 1000:.2f} ms")
    print(f"peak traced allocations: {peak_traced / 2**20:.1f} MiB; peak RSS: {rss_kib / 1024:.1f} MiB")
    ok = plan_s < 1.0 and step_ms < 50 and rss_kib / 1024 < 500
    print("goals (plan < 1 s, step < 50 ms, < 500 MB):", "met" if ok else "NOT met")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

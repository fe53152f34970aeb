"""Prometheus metrics of the runtime, created on an explicit registry (no process-global state)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

# Buckets reach down to 1 ms because the gate-reaction goal is p99 < 0.5 s.
_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.reconciles = Counter(
            "fleetwave_reconcile",
            "Reconciles by controller and result (success, requeue, requeue_after, error).",
            ["controller", "result"],
            registry=self.registry,
        )
        self.reconcile_errors = Counter(
            "fleetwave_reconcile_errors",
            "Reconciles that raised.",
            ["controller"],
            registry=self.registry,
        )
        self.reconcile_duration = Histogram(
            "fleetwave_reconcile_duration_seconds",
            "Time spent in one reconcile.",
            ["controller"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.event_to_reconcile = Histogram(
            "fleetwave_event_to_reconcile_seconds",
            "From a key becoming ready (watch event or timer) to its reconcile starting.",
            ["controller"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.queue_depth = Gauge(
            "fleetwave_workqueue_depth",
            "Keys ready and waiting for a worker.",
            ["controller"],
            registry=self.registry,
        )
        self.shards_held = Gauge(
            "fleetwave_shards_held",
            "Shards whose Lease this replica holds (ADR 0067).",
            registry=self.registry,
        )
        self.leader = Gauge(
            "fleetwave_leader", "1 while this replica holds the leader lease.", registry=self.registry
        )

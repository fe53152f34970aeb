"""Prometheus metrics of the runtime, created on an explicit registry (no process-global state)."""

from __future__ import annotations

import contextlib
import platform

from prometheus_client import (
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    Info,
)

from fleetwave import __version__
from fleetwave.core import rollout_metrics as rm
from fleetwave.kube import request_metrics

# Buckets reach down to 1 ms because the gate-reaction goal is p99 < 0.5 s.
_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
# Rollout waits and stages last seconds to days.
_ROLLOUT_BUCKETS = (
    1.0,
    5.0,
    15.0,
    30.0,
    60.0,
    300.0,
    900.0,
    1800.0,
    3600.0,
    4 * 3600.0,
    12 * 3600.0,
    86400.0,
    7 * 86400.0,
)


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        # /metrics lists the families in the order they are declared here.
        self._declare_reconciles()
        self._declare_load()
        self._declare_leadership()
        self.rollouts = RolloutMetrics(self.registry)
        self.build = Info(
            "fleetwave_build", "The running fleetwave: its version and Python's.", registry=self.registry
        )
        self.build.info({"version": __version__, "python": platform.python_version()})
        if registry is None:  # a registry of our own: the process's CPU, memory and collector pauses too
            for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR, request_metrics.REGISTRY):
                self.registry.register(collector)

    def _declare_reconciles(self) -> None:
        """How many reconciles ran, how they ended, and how long they and the wait for them took."""
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

    def _declare_load(self) -> None:
        """How far behind the process is: event-loop lag, collector pauses, keys waiting for a worker."""
        self.loop_lag = Histogram(
            "fleetwave_event_loop_lag_seconds",
            "How much later than due the event loop woke a task that slept a fixed interval.",
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.gc_pause = Histogram(
            "fleetwave_gc_pause_seconds",
            "Collections of Python's cyclic garbage collector by generation: the event loop stops meanwhile.",
            ["generation"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.queue_depth = Gauge(
            "fleetwave_workqueue_depth",
            "Keys ready and waiting for a worker.",
            ["controller"],
            registry=self.registry,
        )

    def _declare_leadership(self) -> None:
        """Which leases this replica holds."""
        self.shards_held = Gauge(
            "fleetwave_shards_held",
            "Shards whose Lease this replica holds (ADR 0067).",
            registry=self.registry,
        )
        self.leader = Gauge(
            "fleetwave_leader", "1 while this replica holds the leader lease.", registry=self.registry
        )


_Labels = tuple[str, str, str, str, str]


class RolloutMetrics:
    """The rollout metrics (ADR 0082), set from each rollout's status write. Series per rollout are
    bounded by rollouts x stages (x 5 cluster states) and dropped when the rollout is deleted; the
    member label of the delivery counters is bounded by the fleet size; histograms carry no rollout,
    stage or cluster label."""

    def __init__(self, registry: CollectorRegistry) -> None:
        # /metrics lists the families in the order they are declared here.
        self._declare_progress(registry)
        self._declare_waits(registry)
        self._declare_events(registry)
        for kind in ("ClusterPromotion", "ClusterProfile", "ClusterStagedUpdateRun", "StagedUpdateRun"):
            self.stage_duration.labels(kind)
            for outcome in ("started", "finished"):
                self.rollbacks.labels(kind, outcome)
        for result in ("healthy", "unhealthy"):
            self.health_checks.labels(result)
        self._phases: dict[tuple[str, str], str] = {}  # (kind, key) -> phase
        self._series: dict[tuple[str, str], tuple[list[_Labels], list[_Labels]]] = {}

    def _declare_progress(self, registry: CollectorRegistry) -> None:
        """Where each rollout is: its phase, its stages' phases, its clusters' states, its approvals."""
        self.by_phase = Gauge(
            "fleetwave_rollouts", "Rollouts by kind and phase.", ["kind", "phase"], registry=registry
        )
        self.stage_phase = Gauge(
            "fleetwave_rollout_stage_phase",
            "1 for each stage's current phase.",
            ["kind", "namespace", "rollout", "stage", "phase"],
            registry=registry,
        )
        self.clusters = Gauge(
            "fleetwave_rollout_clusters",
            "Member clusters of a rollout's stage by state (pending, in_flight, done, failed, set_aside).",
            ["kind", "namespace", "rollout", "stage", "state"],
            registry=registry,
        )
        self.approvals_pending = Gauge(
            "fleetwave_approvals_pending",
            "Approval gates a rollout is waiting on.",
            ["kind", "namespace", "rollout"],
            registry=registry,
        )

    def _declare_waits(self, registry: CollectorRegistry) -> None:
        """How long gates and stages took, by kind only."""
        self.gate_wait = Histogram(
            "fleetwave_gate_wait_seconds",
            "From a gate list starting to wait (stage entered or delivered) to the gate passing.",
            ["kind"],
            buckets=_ROLLOUT_BUCKETS,
            registry=registry,
        )
        self.stage_duration = Histogram(
            "fleetwave_stage_duration_seconds",
            "From a stage starting delivery to its success.",
            ["rollout_kind"],
            buckets=_ROLLOUT_BUCKETS,
            registry=registry,
        )

    def _declare_events(self, registry: CollectorRegistry) -> None:
        """Deliveries, delivery failures, health judgements and rollbacks, counted."""
        self.deliveries = Counter(
            "fleetwave_member_deliveries",
            "Deliveries a rollout of this kind started to a member cluster.",
            ["kind", "member"],
            registry=registry,
        )
        self.delivery_failures = Counter(
            "fleetwave_member_delivery_failures",
            "Times a member cluster started failing in a rollout of this kind.",
            ["kind", "member"],
            registry=registry,
        )
        self.health_checks = Counter(
            "fleetwave_health_check_evaluations",
            "Health judgements of a member cluster by result (healthy, unhealthy).",
            ["result"],
            registry=registry,
        )
        self.rollbacks = Counter(
            "fleetwave_rollbacks",
            "Rollbacks by rollout kind and outcome (started, finished).",
            ["kind", "outcome"],
            registry=registry,
        )

    def record(self, kind: str, key: str, seen: rm.Observation) -> None:
        namespace, _, name = key.rpartition("/")
        if self._phases.get((kind, key)) != seen.phase:
            self._phases[(kind, key)] = seen.phase
            self._recount(kind)
        stage_labels: list[_Labels] = [
            (kind, namespace, name, stage, phase) for stage, phase in seen.stage_phases
        ]
        counts = {(kind, namespace, name, stage, state): count for stage, state, count in seen.clusters}
        cluster_labels = list(counts)
        # Only the series that went away are removed (a rollout's pass mostly moves counts: removing
        # and re-creating every series at every pass was most of this method's cost).
        old_stages, old_clusters = self._series.get((kind, key), ([], []))
        for labels in set(old_stages) - set(stage_labels):
            self.stage_phase.remove(*labels)
        for labels in set(old_clusters) - set(cluster_labels):
            self.clusters.remove(*labels)
        for labels in stage_labels:
            self.stage_phase.labels(*labels).set(1)
        for labels, count in counts.items():
            self.clusters.labels(*labels).set(count)
        self.approvals_pending.labels(kind, namespace, name).set(seen.approvals_pending)
        self._series[(kind, key)] = (stage_labels, cluster_labels)
        for gate, seconds in seen.gate_waits:
            self.gate_wait.labels(gate).observe(seconds)
        for seconds in seen.stage_durations:
            self.stage_duration.labels(kind).observe(seconds)
        for member in seen.deliveries:
            self.deliveries.labels(kind, member).inc()
        for member in seen.delivery_failures:
            self.delivery_failures.labels(kind, member).inc()
        for outcome in seen.rollbacks:
            self.rollbacks.labels(kind, outcome).inc()

    def forget(self, kind: str, key: str) -> None:
        """A deleted rollout: its series go, and it leaves the phase counts."""
        if self._phases.pop((kind, key), None) is not None:
            self._recount(kind)
        self.forget_series(kind, key)
        namespace, _, name = key.rpartition("/")
        with contextlib.suppress(KeyError):
            self.approvals_pending.remove(kind, namespace, name)

    def forget_series(self, kind: str, key: str) -> None:
        stage_labels, cluster_labels = self._series.pop((kind, key), ([], []))
        for labels in stage_labels:
            self.stage_phase.remove(*labels)
        for labels in cluster_labels:
            self.clusters.remove(*labels)

    def _recount(self, kind: str) -> None:
        counts: dict[str, int] = {}
        for (k, _), phase in self._phases.items():
            if k == kind:
                counts[phase] = counts.get(phase, 0) + 1
        for phase in ("Progressing", "Waiting", "Paused", "Succeeded", "Failed", "RollingBack", "RolledBack"):
            self.by_phase.labels(kind, phase).set(counts.get(phase, 0))

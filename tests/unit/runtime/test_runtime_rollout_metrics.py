"""The rollout metrics on the registry (ADR 0082) and the Grafana dashboard that reads them."""

from __future__ import annotations

import json
import re
from pathlib import Path

from fleetwave.core import rollout_metrics as rm
from fleetwave.runtime.metrics import Metrics

DASHBOARD = Path(__file__).parents[3] / "deploy" / "grafana" / "fleetwave-rollouts.json"
# A family's name, without the suffix of a histogram's or counter's samples.
_NAME = re.compile(r"\b(fleetwave_[a-z0-9_]+?)(?:_bucket|_count|_sum|_total)?\b")


def dashboard_metrics() -> set[str]:
    """The metric families every panel query of the dashboard reads."""
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    assert exprs, "the dashboard has no queries"
    return {name for expr in exprs for name in _NAME.findall(expr)}


def test_every_dashboard_query_reads_a_metric_the_controller_defines() -> None:
    defined = {family.name for family in Metrics().registry.collect()}
    used = dashboard_metrics()
    assert used - defined == set()
    rollout = {
        n for n in used if n not in {"fleetwave_reconcile_errors", "fleetwave_reconcile_duration_seconds"}
    }
    assert len(rollout) >= 10


def _sample(metrics: Metrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def test_record_sets_gauges_counts_once_and_forget_drops_the_rollout() -> None:
    metrics = Metrics()
    seen = rm.Observation(
        phase="Progressing",
        stage_phases=(("dev", "Succeeded"), ("prod", "Progressing")),
        clusters=(("prod", "in_flight", 2),),
        approvals_pending=0,
        gate_waits=(("Approval", 12.0),),
        stage_durations=(30.0,),
        deliveries=("m1",),
        rollbacks=("started",),
    )
    kind = "ClusterPromotion"
    metrics.rollouts.record(kind, "promo", seen)
    metrics.rollouts.record(kind, "other", seen)
    assert _sample(metrics, "fleetwave_rollouts", kind=kind, phase="Progressing") == 2
    stage = {"kind": kind, "namespace": "", "rollout": "promo", "stage": "prod"}
    assert _sample(metrics, "fleetwave_rollout_stage_phase", **stage, phase="Progressing") == 1
    assert _sample(metrics, "fleetwave_rollout_clusters", **stage, state="in_flight") == 2
    assert _sample(metrics, "fleetwave_gate_wait_seconds_count", kind="Approval") == 2
    assert _sample(metrics, "fleetwave_stage_duration_seconds_sum", rollout_kind=kind) == 60
    assert _sample(metrics, "fleetwave_member_deliveries_total", kind=kind, member="m1") == 2
    assert _sample(metrics, "fleetwave_rollbacks_total", kind=kind, outcome="started") == 2
    done = rm.Observation("Succeeded", (("dev", "Succeeded"), ("prod", "Succeeded")), (), 0)
    metrics.rollouts.record(kind, "promo", done)
    assert _sample(metrics, "fleetwave_rollout_stage_phase", **stage, phase="Progressing") is None
    assert _sample(metrics, "fleetwave_rollouts", kind=kind, phase="Succeeded") == 1
    metrics.rollouts.forget(kind, "promo")
    assert _sample(metrics, "fleetwave_rollouts", kind=kind, phase="Succeeded") == 0
    assert _sample(metrics, "fleetwave_rollout_stage_phase", **stage, phase="Succeeded") is None
    assert _sample(metrics, "fleetwave_approvals_pending", kind=kind, namespace="", rollout="promo") is None


def test_a_pass_updates_counts_in_place_and_drops_only_the_series_that_went_away() -> None:
    metrics = Metrics()
    kind = "ClusterPromotion"
    stage = {"kind": kind, "namespace": "", "rollout": "promo", "stage": "prod"}

    def observed(*clusters: tuple[str, str, int]) -> rm.Observation:
        return rm.Observation("Progressing", (("prod", "Progressing"),), tuple(clusters), 0)

    metrics.rollouts.record(kind, "promo", observed(("prod", "in_flight", 3), ("prod", "pending", 7)))
    metrics.rollouts.record(kind, "promo", observed(("prod", "in_flight", 2), ("prod", "done", 1)))
    assert _sample(metrics, "fleetwave_rollout_clusters", **stage, state="in_flight") == 2
    assert _sample(metrics, "fleetwave_rollout_clusters", **stage, state="done") == 1
    assert _sample(metrics, "fleetwave_rollout_clusters", **stage, state="pending") is None
    assert _sample(metrics, "fleetwave_rollout_stage_phase", **stage, phase="Progressing") == 1
    assert _sample(metrics, "fleetwave_rollouts", kind=kind, phase="Progressing") == 1

"""(Cluster)StagedUpdateRun + strategy -> RolloutSpec (seed 004), and what the engine makes of it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from fleetwave.api.codec import Resource, load_manifests, parse_object
from fleetwave.api.models import (
    ClusterResourceSnapshot,
    ClusterStagedUpdateRun,
    ClusterStagedUpdateStrategy,
    StagedUpdateRun,
    StagedUpdateStrategy,
)
from fleetwave.core import model as m
from fleetwave.core import timeline
from fleetwave.translate import (
    TranslateError,
    fleet_from_yaml,
    from_staged_run,
    seed_approval_names,
    snapshot_hash,
)

SEED004 = Path(__file__).resolve().parents[2] / "unit" / "api" / "seed004_objects.yaml"
T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)


def seed_objects() -> list[Resource]:
    return load_manifests(SEED004.read_text())


def first(kind: type[Resource]) -> Any:
    return next(o for o in seed_objects() if isinstance(o, kind))


def test_seed004_cluster_run_translates_tasks_and_ordering() -> None:
    run, strategy = first(ClusterStagedUpdateRun), first(ClusterStagedUpdateStrategy)
    spec = from_staged_run(run, strategy, snapshot_hash="h1")
    staging, canary = spec.stages
    assert (staging.name, canary.name) == ("staging", "canary")
    assert staging.selector == m.Selector(match_labels=(("environment", "staging"),))
    assert staging.after == (m.Delay(timedelta(minutes=1)),)
    # Upstream's name; seed 004's `example-run-canary` is the same approval under a second name.
    assert canary.after == (m.Approval("example-run-after-canary", auto_reset=False),)
    assert seed_approval_names("example-run", spec) == {"example-run-canary": "example-run-after-canary"}
    assert canary.sorting_key == "order"
    assert {s.max_in_flight for s in spec.stages} == {m.MaxInFlight(1)}
    assert all(s.skip_gates_when_empty for s in spec.stages)


def test_seed004_namespaced_run_uses_its_own_strategy() -> None:
    run, strategy = first(StagedUpdateRun), first(StagedUpdateStrategy)
    spec = from_staged_run(run, strategy, snapshot_hash="h1")
    assert [s.name for s in spec.stages] == ["dev-clusters", "prod-clusters"]
    after = m.Approval("web-app-rollout-v1-21-after-prod-clusters", auto_reset=False)
    assert spec.stages[1].after == (after,)


def strategy(stages: list[dict[str, Any]], name: str = "strat") -> ClusterStagedUpdateStrategy:
    obj = parse_object(
        {
            "apiVersion": "fleetwave.io/v1alpha1",
            "kind": "ClusterStagedUpdateStrategy",
            "metadata": {"name": name},
            "spec": {"stages": stages},
        }
    )
    assert isinstance(obj, ClusterStagedUpdateStrategy)
    return obj


def run(strategy_name: str = "strat", name: str = "run-a") -> ClusterStagedUpdateRun:
    obj = parse_object(
        {
            "apiVersion": "fleetwave.io/v1alpha1",
            "kind": "ClusterStagedUpdateRun",
            "metadata": {"name": name},
            "spec": {"placementName": "crp", "stagedRolloutStrategyName": strategy_name},
        }
    )
    assert isinstance(obj, ClusterStagedUpdateRun)
    return obj


def test_before_approval_timed_wait_first_and_nil_versus_empty_selector() -> None:
    strat = strategy(
        [
            {
                "name": "all",
                "labelSelector": {},
                "maxConcurrency": "25%",
                "afterStageTasks": [{"type": "Approval"}, {"type": "TimedWait", "waitTime": "5s"}],
            },
            {"name": "none", "beforeStageTasks": [{"type": "Approval"}]},
        ]
    )
    spec = from_staged_run(run(), strat, snapshot_hash="h")
    first_stage, second = spec.stages
    assert first_stage.selector == m.Selector()
    assert first_stage.max_in_flight == m.MaxInFlight(25, percent=True)
    # TimedWait is put first even when listed second, so both run together (ADR 0025).
    approval = m.Approval("run-a-after-all", auto_reset=False)
    assert first_stage.after == (m.Delay(timedelta(seconds=5)), approval)
    assert second.selector is None
    assert second.before == (m.Approval("run-a-before-none", auto_reset=False),)


def test_a_new_run_or_snapshot_is_a_new_revision_with_the_same_stages() -> None:
    strat = strategy([{"name": "all", "labelSelector": {}}])
    a = from_staged_run(run(name="run-a"), strat, snapshot_hash="h1")
    b = from_staged_run(run(name="run-b"), strat, snapshot_hash="h1")
    c = from_staged_run(run(name="run-a"), strat, snapshot_hash="h2")
    assert len({a.revision.content_hash, b.revision.content_hash, c.revision.content_hash}) == 3
    assert a.revision.stages_hash == b.revision.stages_hash == c.revision.stages_hash


def test_run_naming_another_strategy_is_rejected_naming_the_field() -> None:
    with pytest.raises(TranslateError, match=r"spec\.stagedRolloutStrategyName: names 'other'"):
        from_staged_run(run("other"), strategy([{"name": "all", "labelSelector": {}}]), snapshot_hash="h")


def test_namespaced_run_needs_namespaced_strategy() -> None:
    with pytest.raises(TranslateError, match="needs a StagedUpdateStrategy"):
        from_staged_run(
            first(StagedUpdateRun), strategy([{"name": "x"}], name="app-rollout-strategy"), snapshot_hash="h"
        )


def test_snapshot_hash_prefers_the_resource_hash_annotation() -> None:
    snap = first(ClusterResourceSnapshot)
    r = first(ClusterStagedUpdateRun)
    plain = snapshot_hash(r, snap)
    annotated = snap.model_copy(
        update={
            "metadata": snap.metadata.model_copy(
                update={"annotations": {"kubernetes-fleet.io/resource-hash": "abc"}}
            )
        }
    )
    assert snapshot_hash(r, annotated) == "abc"
    assert plain != snapshot_hash(r, None)


def test_seed004_fleet_canary_rolls_member3_then_member1_after_staging() -> None:
    fleet = fleet_from_yaml("""
clusters:
  - {name: member1, labels: {environment: canary, order: 2}}
  - {name: member2, labels: {environment: staging}}
  - {name: member3, labels: {environment: canary, order: 1}}
""")
    spec = from_staged_run(
        first(ClusterStagedUpdateRun), first(ClusterStagedUpdateStrategy), snapshot_hash="h"
    )
    approve = {"example-run-after-canary": T0 + timedelta(minutes=10)}
    sim = timeline.simulate(spec, fleet, T0, timeline.Assumptions(timedelta(seconds=30), approvals=approve))
    staging, canary = sim.stages
    assert staging.succeeded_at == T0 + timedelta(seconds=90)  # 30s delivery + 1m TimedWait
    assert [b.clusters for b in canary.batches] == [("member3",), ("member1",)]
    assert canary.entered_at == staging.succeeded_at
    assert canary.succeeded_at == T0 + timedelta(minutes=10)
    assert sim.outcome == "Succeeded"

"""Rolling a staged update run back (issue 13, ADR 0078), the pure parts: which snapshot a run returns
to, a person's request, what a pass decides and renders once the run has failed with onFailure
Rollback or was asked to roll back, and the run as an entry of its placement's history."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from fleetwave.controllers.kubefleet import ledger as lg
from fleetwave.controllers.kubefleet import naming as nm
from fleetwave.controllers.kubefleet import (
    parsed,
    run_execute,
    run_history,
    run_initialize,
    run_rollback,
    run_status,
)
from fleetwave.controllers.kubefleet import snapshots as sn
from fleetwave.controllers.kubefleet.run_pass import Setting
from fleetwave.controllers.kubefleet.run_record import RunRecord
from fleetwave.core import batching
from fleetwave.core import model as m
from fleetwave.core import status as st

T0 = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
STRATEGY: dict[str, Any] = {
    "stages": [
        {"name": "dev", "labelSelector": {"matchLabels": {"env": "dev"}}},
        {"name": "prod", "labelSelector": {"matchLabels": {"env": "prod"}}},
    ],
    "failureBudget": {"gracePeriod": "1m"},
    "onFailure": "Rollback",
}
FLEET = m.Fleet.of([m.Cluster("fleet/dev-1", {"env": "dev"}), m.Cluster("fleet/prod-1", {"env": "prod"})])
NEW = lg.Content(index="1", hash="h1", objects=({"kind": "ConfigMap"},), inventory="kf/crp/web")
OLD = replace(NEW, index="0", hash="h0")
BROKEN = m.Delivery(m.DeliveryPhase.FAILED, message="apply failed: conflict")
READY = m.Delivery(m.DeliveryPhase.APPLIED, ready=True)


def _snapshot(index: int, digest: str) -> dict[str, Any]:
    return sn.snapshot_body("ClusterResourceSnapshot", "web", None, index, [{"kind": "ConfigMap"}], digest)


def _run(name: str, snapshot: str, succeeded: str | None, at: str = "2026-11-25T10:00:00Z") -> dict[str, Any]:
    conditions = [{"type": "Initialized", "status": "True", "lastTransitionTime": at}]
    if succeeded:
        reason = "UpdateRunSucceeded" if succeeded == "True" else "UpdateRunFailed"
        conditions.append(
            {"type": "Succeeded", "status": succeeded, "reason": reason, "lastTransitionTime": at}
        )
    return {
        "metadata": {"name": name},
        "spec": {"placementName": "web"},
        "status": {"snapshot": {"name": snapshot}, "conditions": conditions},
    }


SNAPSHOTS = [_snapshot(0, "h0"), _snapshot(1, "h1"), _snapshot(2, "h2")]


def test_the_target_is_the_newest_run_that_succeeded_with_other_content_whose_snapshot_exists() -> None:
    runs = [
        _run("r0", "web-0-snapshot", "True", "2026-11-25T09:00:00Z"),
        _run("r1", "web-1-snapshot", "True", "2026-11-25T10:00:00Z"),
        _run("r2", "web-2-snapshot", "False", "2026-11-25T11:00:00Z"),  # failed: never proven good
        _run("other", "web-2-snapshot", "True") | {"spec": {"placementName": "api"}},
    ]
    target = run_rollback.last_good(runs, SNAPSHOTS, "web", current_hash="h2")
    assert target == run_rollback.Target("web-1-snapshot", 1, "h1")
    assert target is not None
    assert target.label == "resource snapshot 1"
    # Its own content is no target; a pruned snapshot is none either.
    assert run_rollback.last_good(runs, SNAPSHOTS, "web", current_hash="h1") == run_rollback.Target(
        "web-0-snapshot", 0, "h0"
    )
    assert run_rollback.last_good(runs, SNAPSHOTS[2:], "web", current_hash="h2") is None


def test_a_named_snapshot_is_a_target_only_if_it_exists_with_other_content() -> None:
    assert run_rollback.by_index(SNAPSHOTS, 0, "h2") == run_rollback.Target("web-0-snapshot", 0, "h0")
    assert run_rollback.by_index(SNAPSHOTS, 2, "h2") is None
    assert run_rollback.by_index(SNAPSHOTS, 7, "h2") is None


def test_a_request_is_read_from_the_annotations() -> None:
    assert run_rollback.request_of({}) == run_rollback.NO_REQUEST
    asked = run_rollback.request_of(
        {"annotations": {"fleetwave.io/rollback": "1", "fleetwave.io/rollback-to": "0"}}
    )
    assert asked == run_rollback.Request("rollback requested", 0)


def _setting(**changes: Any) -> Setting:
    raw = {
        "metadata": {"name": "run-1", "generation": 1},
        "spec": {"placementName": "web", "stagedRolloutStrategyName": "s", "state": "Run"},
    }
    run = parsed.run(raw, nm.CLUSTER.run)
    strategy = parsed.strategy({"metadata": {"name": "s"}, "spec": STRATEGY}, nm.CLUSTER.strategy).spec
    spec = parsed.rollout_spec(run, nm.CLUSTER, strategy, "h1", poll=run_initialize.POLL)
    frame = run_status.Frame(nm.CLUSTER.run, 1, "run-1", lambda c: c.partition("/")[2])
    where = Setting(nm.CLUSTER, None, run, frame, spec, FLEET, NEW, timedelta(minutes=5))
    return replace(where, **changes)


def _record(where: Setting) -> RunRecord:
    return RunRecord(
        snapshot_name="web-1-snapshot",
        snapshot_hash="h1",
        index="1",
        strategy_raw=STRATEGY,
        rollout=batching.freeze_plan(where.spec, FLEET, T0),
        ledger={},
        approvals={},
        deletion_clusters=(),
        deletions={},
    )


def _through_dev_then_prod_fails(where: Setting) -> tuple[RunRecord, datetime]:
    """dev gets the new snapshot; prod's delivery keeps failing past the 1-minute grace."""
    record = _record(where)
    at = T0
    for deliveries in ({}, {"fleet/dev-1": READY}, {"fleet/dev-1": READY, "fleet/prod-1": BROKEN}):
        record = run_execute.decide(where, record, deliveries, {}, at).record
        at += timedelta(seconds=1)
    at += timedelta(minutes=2)
    step = run_execute.decide(where, record, {"fleet/dev-1": READY, "fleet/prod-1": BROKEN}, {}, at)
    return step.record, at


def test_onfailure_rollback_returns_prod_then_dev_to_the_previous_snapshot() -> None:
    where = _setting(target=m.RollbackTarget("h0", "resource snapshot 0"), back=OLD)
    record, at = _through_dev_then_prod_fails(where)
    assert record.rollout.phase is st.RolloutPhase.ROLLING_BACK
    assert where.delivering(record.rollout) is OLD  # deliveries are of the target now
    body = run_status.render(where.frame, record, mode="Run", previous={}, now=at)
    progressing = next(c for c in body["conditions"] if c["type"] == "Progressing")
    assert progressing["reason"] == "UpdateRunRollingBack"
    assert "rolling back to resource snapshot 0" in progressing["message"]
    assert not any(c["type"] == "Succeeded" for c in body["conditions"])  # not over: not terminal
    # prod first: the next pass asks for prod-1 only, with the target's content.
    step = run_execute.decide(where, record, {}, {}, at + timedelta(seconds=1))
    assert step.deliver == ("fleet/prod-1",)
    step = run_execute.decide(where, step.record, {"fleet/prod-1": READY}, {}, at + timedelta(seconds=2))
    assert step.deliver == ("fleet/dev-1",)
    done = run_execute.decide(
        where, step.record, {"fleet/prod-1": READY, "fleet/dev-1": READY}, {}, at + timedelta(seconds=3)
    )
    assert done.record.rollout.phase is st.RolloutPhase.ROLLED_BACK
    body = run_status.render(where.frame, done.record, mode="Run", previous={}, now=at)
    ended = next(c for c in body["conditions"] if c["type"] == "Succeeded")
    assert (ended["status"], ended["reason"]) == ("False", "UpdateRunRolledBack")
    assert ended["message"].startswith(
        "rolled back to resource snapshot 0: stage prod: failure budget exceeded"
    )


def test_without_a_target_the_run_fails_saying_there_is_nothing_to_roll_back_to() -> None:
    where = _setting()
    record, at = _through_dev_then_prod_fails(where)
    assert record.rollout.phase is st.RolloutPhase.FAILED
    assert "nothing to roll back to" in record.rollout.message
    body = run_status.render(where.frame, record, mode="Run", previous={}, now=at)
    ended = next(c for c in body["conditions"] if c["type"] == "Succeeded")
    assert ended["reason"] == "UpdateRunFailed"


def test_a_request_rolls_back_a_run_that_succeeded() -> None:
    where = _setting(target=m.RollbackTarget("h0", "resource snapshot 0"), back=OLD)
    record, at = _record(where), T0
    for deliveries in ({}, {"fleet/dev-1": READY}, {"fleet/dev-1": READY, "fleet/prod-1": READY}):
        record = run_execute.decide(where, record, deliveries, {}, at).record
        at += timedelta(seconds=1)
    assert record.rollout.phase is st.RolloutPhase.SUCCEEDED
    asked = replace(where, request=run_rollback.Request("requested with fleetwave rollback"))
    step = run_execute.decide(asked, record, {}, {}, at)
    assert step.record.rollout.phase is st.RolloutPhase.ROLLING_BACK
    assert step.deliver == ("fleet/prod-1",)


def test_a_run_in_history_names_its_snapshot_outcome_approvals_and_rollback() -> None:
    run = _run("r2", "web-2-snapshot", None)
    run["status"] |= {
        "resourceSnapshotIndexUsed": "2",
        "approvals": {"r2-dev-after": {"createdAt": "t1", "approvedAt": "2026-11-25T10:05:00Z"}},
        "rollout": {"startedAt": "2026-11-25T10:00:01Z", "rollback": {"label": "resource snapshot 1"}},
    }
    run["status"]["conditions"].append(
        {
            "type": "Succeeded",
            "status": "False",
            "reason": "UpdateRunRolledBack",
            "message": "rolled back to resource snapshot 1: failure budget exceeded",
            "lastTransitionTime": "2026-11-25T10:09:00Z",
        }
    )
    entry = run_history.entry(run)
    assert entry == {
        "run": "r2",
        "snapshotIndex": "2",
        "startedAt": "2026-11-25T10:00:01Z",
        "endedAt": "2026-11-25T10:09:00Z",
        "outcome": "RolledBack",
        "approvals": {"r2-dev-after": "2026-11-25T10:05:00Z"},
        "message": "rolled back to resource snapshot 1: failure budget exceeded",
        "rolledBackTo": "resource snapshot 1",
    }
    assert run_history.outcome(_run("r3", "web-2-snapshot", None)["status"]) == "Progressing"
    assert run_history.outcome({}) == "NotStarted"

"""The staged-run wing's pure parts: the record round trip, one pass's decision, and what a pass
renders before its effects run (the next stage Started before its clusters are applied)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from fleetwave import translate
from fleetwave.controllers.kubefleet import ledger as lg
from fleetwave.controllers.kubefleet import naming as nm
from fleetwave.controllers.kubefleet import (
    parsed,
    run_delete,
    run_execute,
    run_initialize,
    run_record,
    run_status,
    run_stop,
)
from fleetwave.controllers.kubefleet import removals as rm
from fleetwave.controllers.kubefleet.run_execute import Request
from fleetwave.controllers.kubefleet.run_pass import Setting, in_flight, stuck
from fleetwave.controllers.kubefleet.run_record import RunRecord, Seen
from fleetwave.core import batching
from fleetwave.core import model as m
from fleetwave.core import status as st

T0 = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
STRATEGY = {
    "stages": [
        {
            "name": "dev",
            "labelSelector": {"matchLabels": {"env": "dev"}},
            "afterStageTasks": [{"type": "Approval"}],
        },
        {"name": "prod", "labelSelector": {"matchLabels": {"env": "prod"}}},
    ]
}
FLEET = m.Fleet.of([m.Cluster("fleet/dev-1", {"env": "dev"}), m.Cluster("fleet/prod-1", {"env": "prod"})])
CONTENT = lg.Content(index="1", hash="h1", objects=(), inventory="kf/crp/web")
AFTER_DEV = translate.approval_request_name("run-1", "dev", "after")


def _setting() -> Setting:
    raw = {
        "metadata": {"name": "run-1", "generation": 1},
        "spec": {"placementName": "web", "stagedRolloutStrategyName": "s", "state": "Run"},
    }
    run = parsed.run(raw, nm.CLUSTER.run)
    strategy = parsed.strategy({"metadata": {"name": "s"}, "spec": STRATEGY}, nm.CLUSTER.strategy).spec
    spec = parsed.rollout_spec(run, nm.CLUSTER, strategy, "h1", poll=run_initialize.POLL)
    frame = run_status.Frame(nm.CLUSTER.run, 1, "run-1", lambda c: c.partition("/")[2])
    return Setting(nm.CLUSTER, None, run, frame, spec, FLEET, CONTENT, timedelta(minutes=5))


def _record(where: Setting, **changes: Any) -> RunRecord:
    plan = batching.freeze_plan(where.spec, FLEET, T0)
    record = RunRecord(
        snapshot_name="web-1-snapshot",
        snapshot_hash="h1",
        index="1",
        strategy_raw=STRATEGY,
        rollout=plan,
        ledger={},
        approvals={},
        deletion_clusters=(),
        deletions={},
    )
    return replace(record, **changes)


def _done(cluster: str, at: datetime) -> lg.Delivered:
    return lg.Delivered("1", "h1", applied_at=st.fmt(at), message="ready", done_at=st.fmt(at))


def test_record_survives_a_round_trip_through_status_and_writes_no_nulls() -> None:
    where = _setting()
    record = _record(
        where,
        ledger={"fleet/dev-1": _done("fleet/dev-1", T0)},
        approvals={AFTER_DEV: Seen(st.fmt(T0), st.fmt(T0))},
        deletion_clusters=("fleet/old-1",),
        deletions={"fleet/old-1": rm.Removal(st.fmt(T0), "unreachable")},
        stopped_at=st.fmt(T0),
    )
    dumped = run_record.dump(record)
    assert run_record.load(dumped) == record
    own = {k: dumped[k] for k in ("snapshot", "deliveries", "approvals", "deletions", "stoppedAt")}
    assert None not in _leaves(own)  # a null would be dropped by the API server and re-sent forever


def test_ledger_entries_at_the_runs_snapshot_leave_its_hash_out_and_keep_their_index() -> None:
    # ADR 0137: the same 64-character hash on every cluster, sent on every status write.
    where = _setting()
    back = lg.Delivered("0", "h0", applied_at=st.fmt(T0), message="ready")  # a rollback's target
    odd = lg.Delivered("1", "", applied_at=st.fmt(T0))  # an empty hash round-trips as empty
    ledger = {"fleet/dev-1": _done("fleet/dev-1", T0), "fleet/dev-2": back, "fleet/dev-3": odd}
    record = _record(where, ledger=ledger)
    dumped = run_record.dump(record)
    assert dumped["deliveries"]["fleet/dev-1"] == {
        "index": "1",
        "appliedAt": st.fmt(T0),
        "message": "ready",
        "doneAt": st.fmt(T0),
    }
    assert dumped["deliveries"]["fleet/dev-2"]["index"] == "0"
    assert dumped["deliveries"]["fleet/dev-2"]["hash"] == "h0"
    assert dumped["deliveries"]["fleet/dev-3"] == {
        "index": "1",
        "hash": "",
        "appliedAt": st.fmt(T0),
        "message": "",
    }
    assert run_record.load(dumped) == record


def test_a_ledger_written_with_every_index_and_hash_reads_the_same() -> None:
    where = _setting()
    record = _record(where, ledger={"fleet/dev-1": _done("fleet/dev-1", T0)})
    dumped = run_record.dump(record)
    dumped["deliveries"]["fleet/dev-1"] |= {"hash": "h1"}  # as written before ADR 0137
    assert run_record.load(dumped) == record


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in _leaves(v)]
    if isinstance(value, list):
        return [leaf for v in value for leaf in _leaves(v)]
    return [value]


def test_a_damaged_record_is_refused_with_a_reason() -> None:
    with pytest.raises(run_record.Unreadable, match="damaged"):
        run_record.load({"snapshot": {"name": "x"}})


def test_first_pass_delivers_the_first_stage_only() -> None:
    where = _setting()
    step = run_execute.decide(where, _record(where), {}, {}, T0)
    assert step.deliver == ("fleet/dev-1",)
    assert (step.create, step.accept, step.remove) == ((), (), ())


def test_a_finished_stage_asks_for_its_approval_once_and_records_when_it_was_created() -> None:
    where = _setting()
    first = run_execute.decide(where, _record(where), {}, {}, T0)
    record = replace(first.record, ledger={"fleet/dev-1": _done("fleet/dev-1", T0)})
    ready = {"fleet/dev-1": m.Delivery(m.DeliveryPhase.APPLIED, ready=True)}
    later = T0 + timedelta(seconds=5)
    step = run_execute.decide(where, record, ready, {}, later)
    assert step.create == (("dev", AFTER_DEV),)
    assert step.record.approvals[AFTER_DEV] == Seen(st.fmt(later))
    again = run_execute.decide(where, step.record, ready, {AFTER_DEV: Request(False, False)}, later)
    assert (again.create, again.deliver) == ((), ())


def test_an_approval_starts_the_next_stage_in_the_written_status_before_any_apply() -> None:
    where = _setting()
    first = run_execute.decide(where, _record(where), {}, {}, T0)
    record = replace(first.record, ledger={"fleet/dev-1": _done("fleet/dev-1", T0)})
    ready = {"fleet/dev-1": m.Delivery(m.DeliveryPhase.APPLIED, ready=True)}
    waiting = run_execute.decide(where, record, ready, {}, T0)
    frozen_before = run_record.dump(waiting.record)
    approved = {AFTER_DEV: Request(approved=True, accepted=False)}
    step = run_execute.decide(where, waiting.record, ready, approved, T0 + timedelta(seconds=1))
    assert run_record.dump(waiting.record) == frozen_before  # decide never edits its input
    assert step.accept == (AFTER_DEV,)
    assert step.deliver == ("fleet/prod-1",)
    body = run_status.render(where.frame, step.record, mode="Run", previous={}, now=T0)
    prod = next(s for s in body["stagesStatus"] if s["stageName"] == "prod")
    assert [c["clusterName"] for c in prod["clusters"]] == ["prod-1"]
    assert prod["clusters"][0]["conditions"][0]["type"] == "Started"
    assert "fleet/prod-1" not in body["deliveries"]  # applied only after this status is written


def test_accepted_approvals_stand_even_when_the_request_is_deleted() -> None:
    where = _setting()
    record = _record(where, approvals={AFTER_DEV: Seen(st.fmt(T0), st.fmt(T0))})
    step = run_execute.decide(where, record, {}, {}, T0)
    assert step.record.approvals[AFTER_DEV].approved_at == st.fmt(T0)


def test_resuming_does_not_count_the_stopped_time_against_the_progress_deadline() -> None:
    where = _setting()
    first = run_execute.decide(where, _record(where), {}, {}, T0)
    stopped = replace(first.record, stopped_at=st.fmt(T0))
    step = run_execute.decide(where, stopped, {}, {}, T0 + timedelta(hours=2))
    assert step.record.stopped_at is None
    assert step.record.rollout.phase is not st.RolloutPhase.FAILED


def test_the_deletion_stage_waits_for_success_then_clears_only_what_is_left() -> None:
    where = _setting()
    record = _record(
        where,
        deletion_clusters=("fleet/a", "fleet/b"),
        deletions={"fleet/a": rm.Removal(st.fmt(T0), "removed 1 objects", st.fmt(T0))},
    )
    assert run_delete.todo(record) == ()
    done = replace(record, rollout=replace(record.rollout, phase=st.RolloutPhase.SUCCEEDED))
    assert run_delete.todo(done) == ("fleet/b",)


def test_in_flight_and_stuck_read_the_ledger() -> None:
    where = _setting()
    first = run_execute.decide(where, _record(where), {}, {}, T0)
    applied = lg.Delivered("1", "h1", applied_at=st.fmt(T0), message="Deployment web not available")
    rollout = first.record.rollout
    assert in_flight(rollout, {"fleet/dev-1": applied}, FLEET)
    assert not in_flight(rollout, {"fleet/dev-1": _done("fleet/dev-1", T0)}, FLEET)
    assert stuck(where, rollout, {"fleet/dev-1": applied}, T0 + timedelta(minutes=1)) == ""
    message = stuck(where, rollout, {"fleet/dev-1": applied}, T0 + timedelta(minutes=6))
    assert "fleet/dev-1" in message
    assert "not available" in message


def test_a_stopped_run_finishes_a_started_cluster_whose_apply_was_never_recorded() -> None:
    where = _setting()
    first = run_execute.decide(where, _record(where), {}, {}, T0)
    assert run_stop.unapplied(first.record, where) == ("fleet/dev-1",)
    recorded = replace(first.record, ledger={"fleet/dev-1": _done("fleet/dev-1", T0)})
    assert run_stop.unapplied(recorded, where) == ()
    stale = replace(first.record, ledger={"fleet/dev-1": replace(_done("fleet/dev-1", T0), hash="h0")})
    assert run_stop.unapplied(stale, where) == ("fleet/dev-1",)


def test_a_waiting_clusters_changing_message_is_progress_only_and_its_becoming_available_is_not() -> None:
    where = _setting()
    first = run_execute.decide(where, _record(where), {}, {}, T0)

    def waiting(message: str) -> lg.Delivered:
        return lg.Delivered("1", "h1", applied_at=st.fmt(T0), message=message)

    def body(record: RunRecord, previous: dict[str, Any]) -> dict[str, Any]:
        return run_status.render(where.frame, record, mode="Run", previous=previous, now=T0)

    one = replace(first.record, ledger={"fleet/dev-1": waiting("0 of 1 updated replicas available")})
    written = body(one, {})
    two = replace(first.record, ledger={"fleet/dev-1": waiting("1 updated, 0 available")})
    moved = body(two, written)
    assert moved != written
    assert run_status.progress_only(written, moved)
    assert not run_status.progress_only(written, body(one, written))  # nothing changed at all
    done = replace(first.record, ledger={"fleet/dev-1": _done("fleet/dev-1", T0)})
    assert not run_status.progress_only(written, body(done, written))


def test_why_a_stage_holds_is_never_progress_only() -> None:
    where = _setting()
    first = run_execute.decide(where, _record(where), {}, {}, T0)
    written = run_status.render(where.frame, first.record, mode="Run", previous={}, now=T0)
    stage = first.record.rollout.stages[0]
    held = replace(stage, message="webhook smoke not passing for cluster dev-1: 503")
    record = replace(first.record, rollout=first.record.rollout.with_stage(0, held))
    moved = run_status.render(where.frame, record, mode="Run", previous=written, now=T0)
    assert moved != written
    assert not run_status.progress_only(written, moved)


def _req(approved: bool = False, accepted: bool = False, generation: int = 1) -> dict[str, Any]:
    conds = [{"type": "Approved", "status": "True", "observedGeneration": generation}] if approved else []
    conds += [{"type": "ApprovalAccepted", "status": "True"}] if accepted else []
    return {"metadata": {"generation": 1}, "status": {"conditions": conds}}


def test_the_seed_name_of_an_after_stage_approval_is_the_same_approval_as_upstreams() -> None:
    where = _setting()
    assert AFTER_DEV == "run-1-after-dev"
    assert where.seed_approval_names == {"run-1-dev": AFTER_DEV}
    # Approving the seed's name counts for the gate, once; both objects are acknowledged.
    raw = {AFTER_DEV: _req(), "run-1-dev": _req(approved=True)}
    requests = run_execute.requests_of(raw, where.seed_approval_names)
    assert requests == {AFTER_DEV: Request(True, False, "run-1-dev", (AFTER_DEV, "run-1-dev"))}
    first = run_execute.decide(where, _record(where), {}, {}, T0)
    record = replace(first.record, ledger={"fleet/dev-1": _done("fleet/dev-1", T0)})
    ready = {"fleet/dev-1": m.Delivery(m.DeliveryPhase.APPLIED, ready=True)}
    step = run_execute.decide(where, record, ready, requests, T0)
    assert step.accept == (AFTER_DEV,)
    assert step.acknowledge == ((AFTER_DEV, "run-1-dev"), ("run-1-dev", "run-1-dev"))
    assert set(step.record.approvals) == {AFTER_DEV}  # one approval in status, under upstream's name
    assert step.deliver == ("fleet/prod-1",)


def test_an_approval_given_under_both_names_counts_once_and_stays_accepted() -> None:
    names = {"run-1-dev": AFTER_DEV}
    both = run_execute.requests_of({AFTER_DEV: _req(True), "run-1-dev": _req(True)}, names)
    assert list(both) == [AFTER_DEV]
    assert both[AFTER_DEV].approved_as == AFTER_DEV
    done = run_execute.requests_of({AFTER_DEV: _req(True, True), "run-1-dev": _req(False, True)}, names)
    assert done == {AFTER_DEV: Request(True, True, AFTER_DEV, ())}
    # A stale approval (older generation) under either name does not count.
    stale = run_execute.requests_of({"run-1-dev": _req(True, generation=0)}, names)
    assert stale == {AFTER_DEV: Request(False, False, "", ("run-1-dev",))}

"""What a status write means for the rollout metrics (ADR 0082): pure comparisons of two records."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from fleetwave.core import rollout_metrics as rm
from fleetwave.core import status as st

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _record(
    *stages: st.StageStatus, phase: st.RolloutPhase = st.RolloutPhase.PROGRESSING
) -> st.RolloutStatus:
    members = frozenset(c for s in stages for c in s.clusters)
    return st.RolloutStatus(
        content_hash="c1",
        stages_hash="s1",
        started_at=T0,
        stages=stages,
        stage_of={c: i for i, s in enumerate(stages) for c in s.clusters},
        members=members,
        phase=phase,
    )


def _waiting(kind: str) -> st.GateStatus:
    return st.GateStatus(kind, st.GateState.WAITING, f"waiting on {kind}")


def test_gauges_count_clusters_by_state_and_waiting_approvals() -> None:
    dev = st.StageStatus(
        "dev",
        ("a", "b", "c", "d", "e"),
        2,
        phase=st.StagePhase.PROGRESSING,
        started=("a", "b", "c", "d"),
        completed=1,
        failed=(("c", "boom"),),
        set_aside=(("d", "over"),),
    )
    prod = st.StageStatus(
        "prod", ("f",), 1, phase=st.StagePhase.WAITING_BEFORE, gates=(_waiting("Approval"),)
    )
    seen = rm.observe(None, _record(dev, prod), T0)
    assert seen.phase == "Progressing"
    assert seen.stage_phases == (("dev", "Progressing"), ("prod", "WaitingBefore"))
    assert {(s, k): n for s, k, n in seen.clusters} == {
        ("dev", "pending"): 1,
        ("dev", "in_flight"): 1,
        ("dev", "done"): 1,
        ("dev", "failed"): 1,
        ("dev", "set_aside"): 1,
        ("prod", "pending"): 1,
        ("prod", "in_flight"): 0,
        ("prod", "done"): 0,
        ("prod", "failed"): 0,
        ("prod", "set_aside"): 0,
    }
    assert seen.approvals_pending == 1
    assert seen.deliveries == ("a", "b", "c", "d")
    assert seen.delivery_failures == ("c",)


def test_a_step_observes_gate_waits_stage_durations_and_new_deliveries_once() -> None:
    entered = st.StageStatus(
        "prod",
        ("x", "y"),
        1,
        phase=st.StagePhase.WAITING_BEFORE,
        entered_at=T0,
        gates=(st.GateStatus("Delay", st.GateState.PASSED, "done"), _waiting("Approval")),
    )
    started = replace(
        entered,
        phase=st.StagePhase.PROGRESSING,
        started_at=T0 + timedelta(seconds=90),
        started=("x",),
        gates=(),
    )
    seen = rm.observe(_record(entered), _record(started), T0 + timedelta(seconds=95))
    assert seen.gate_waits == (("Approval", 90.0),)  # the Delay had passed before this step
    assert seen.deliveries == ("x",)
    delivered = replace(
        started,
        phase=st.StagePhase.WAITING_AFTER,
        started=("x", "y"),
        completed=2,
        delivered_at=T0 + timedelta(seconds=100),
        gates=(_waiting("HealthChecks"), st.GateStatus("Webhook", st.GateState.PENDING, "")),
    )
    seen = rm.observe(_record(started), _record(delivered), T0 + timedelta(seconds=101))
    assert seen.deliveries == ("y",)
    assert (seen.gate_waits, seen.stage_durations) == ((), ())
    checked = replace(
        delivered, gates=(st.GateStatus("HealthChecks", st.GateState.PASSED, ""), _waiting("Webhook"))
    )
    seen = rm.observe(_record(delivered), _record(checked), T0 + timedelta(seconds=130))
    assert seen.gate_waits == (("HealthChecks", 30.0),)
    done = replace(checked, phase=st.StagePhase.SUCCEEDED, succeeded_at=T0 + timedelta(seconds=160), gates=())
    final = _record(done, phase=st.RolloutPhase.SUCCEEDED)
    seen = rm.observe(_record(checked), final, T0 + timedelta(seconds=161))
    assert seen.gate_waits == (("Webhook", 60.0),)
    assert seen.stage_durations == (70.0,)
    assert seen.phase == "Succeeded"
    again = rm.observe(final, final, T0 + timedelta(seconds=200))  # an unchanged record observes nothing
    assert (again.gate_waits, again.stage_durations, again.deliveries) == ((), (), ())


def test_rollbacks_are_counted_when_they_start_and_when_they_finish() -> None:
    stage = st.StageStatus("dev", ("a",), 1, phase=st.StagePhase.FAILED, started=("a",))
    failed = _record(stage, phase=st.RolloutPhase.FAILED)
    back = st.RollbackStatus(target="c0", label="revision 1", reason="failed", started_at=T0, stages=())
    rolling = replace(failed, phase=st.RolloutPhase.ROLLING_BACK, rollback=back)
    assert rm.observe(failed, rolling, T0).rollbacks == ("started",)
    rolled = replace(rolling, phase=st.RolloutPhase.ROLLED_BACK)
    assert rm.observe(rolling, rolled, T0).rollbacks == ("finished",)
    assert rm.observe(rolled, rolled, T0).rollbacks == ()

"""The Analysis gate (ADR 0081): the engine judges the measurement series the shell supplies — count,
failureLimit, failure for good — and wakes the rollout when the next measurement is due."""

from __future__ import annotations

from datetime import timedelta

from core_helpers import DONE, T0, Driver, delivers, fleet, minutes, spec, stage

from fleetwave.core import model as m
from fleetwave.core import status as st
from fleetwave.translate import plan_report

GATE = m.Analysis("errors", count=3, failure_limit=1, interval=timedelta(seconds=30))


def _two_stages(*after: m.Gate, **kw: object) -> Driver:
    return Driver(spec(stage("dev", after=after), stage("prod"), **kw), fleet(dev=2, prod=1))


def _delivered(d: Driver) -> None:
    d.step()
    d.complete_in_flight()


def _series(d: Driver, **by_cluster: m.Measurements) -> None:
    d.observed_analyses[("dev", "errors")] = {k.replace("_", "-"): v for k, v in by_cluster.items()}


def test_an_analysis_waits_for_count_measurements_and_wakes_when_the_next_is_due() -> None:
    d = _two_stages(GATE)
    _delivered(d)
    assert delivers(d.step(T0 + minutes(1))) == []
    assert d.stage("dev").message == "after-gates: waiting for analysis errors"
    due = T0 + minutes(2)
    _series(d, **{"": m.Measurements(2, 1, "result 3: successCondition is false", due)})
    decision = d.step(T0 + minutes(1))
    assert delivers(decision) == []
    assert d.stage("dev").message == "after-gates: analysis errors: 2/3 measurements, 1 failed"
    assert decision.wake_at == due  # the next measurement is due then
    _series(d, **{"": m.Measurements(3, 1, "result 3: successCondition is false")})
    decision = d.step(T0 + minutes(2))
    assert delivers(decision) == ["prod-0"]
    gate = d.stage("dev").gates[0]
    assert (gate.kind, gate.state, gate.message) == (
        "Analysis",
        st.GateState.PASSED,
        "analysis errors passed: 3 measurements, 1 failed",
    )


def test_an_analysis_past_its_failure_limit_holds_the_stage_without_a_budget() -> None:
    d = _two_stages(GATE)
    _delivered(d)
    _series(d, **{"": m.Measurements(2, 2, "query failed: cannot connect to http://127.0.0.1:1")})
    for at in (1, 5, 30):
        assert delivers(d.step(T0 + minutes(at))) == []
    assert d.stage("dev").message == (
        "after-gates: analysis errors failed: 2 of 2 measurements failed (limit 1): "
        "query failed: cannot connect to http://127.0.0.1:1"
    )
    assert d.status is not None
    assert d.status.phase is st.RolloutPhase.WAITING


def test_a_stage_wide_analysis_failing_fails_the_rollout_when_it_has_a_failure_budget() -> None:
    budget = m.FailureBudget(per_stage=m.FailureLimit(1), grace=minutes(5))
    d = _two_stages(GATE, failure_budget=budget)
    _delivered(d)
    _series(d, **{"": m.Measurements(2, 2, "result 9: successCondition is false")})
    decision = d.step(T0 + minutes(1))
    assert d.status is not None
    assert d.status.phase is st.RolloutPhase.FAILED
    assert d.stage("dev").message.startswith("analysis errors failed: 2 of 2 measurements failed (limit 1)")
    succeeded = next(c for c in d.status.conditions if c.type == "Succeeded")
    assert succeeded.reason is st.Reason.ANALYSIS_FAILED
    assert any("AnalysisFailed" in e for e in (type(x).__name__ + str(x) for x in decision.effects))


def test_a_per_cluster_analysis_failing_sets_the_cluster_aside_at_once_within_the_budget() -> None:
    budget = m.FailureBudget(per_stage=m.FailureLimit(1), grace=minutes(5))
    gate = m.Analysis("errors", count=2, per_cluster=True)
    d = _two_stages(gate, failure_budget=budget)
    d.step()
    d.delivery.update({"dev-0": DONE, "dev-1": DONE})
    _series(d, dev_0=m.Measurements(2, 0), dev_1=m.Measurements(1, 1, "result 5: successCondition is false"))
    decision = d.step(T0 + minutes(1))  # no grace: the measurements were its grace
    assert d.stage("dev").set_aside == (
        (
            "dev-1",
            "analysis errors: 1 of 1 measurements failed (limit 0): result 5: successCondition is false",
        ),
    )
    assert delivers(decision) == ["prod-0"]


def test_a_per_cluster_analysis_over_the_budget_fails_the_rollout() -> None:
    budget = m.FailureBudget(per_stage=m.FailureLimit(0), grace=minutes(5))
    gate = m.Analysis("errors", count=2, per_cluster=True)
    d = _two_stages(gate, failure_budget=budget)
    _delivered(d)
    _series(d, dev_0=m.Measurements(1, 0, next_at=T0), dev_1=m.Measurements(1, 1, "bad"))
    d.step(T0 + minutes(1))
    assert d.status is not None
    assert d.status.phase is st.RolloutPhase.FAILED
    assert d.stage("dev").over_budget


def test_a_per_cluster_analysis_waits_for_every_cluster() -> None:
    gate = m.Analysis("errors", count=2, per_cluster=True)
    d = _two_stages(gate)
    _delivered(d)
    _series(d, dev_0=m.Measurements(2, 0), dev_1=m.Measurements(1, 0, next_at=T0 + minutes(2)))
    assert delivers(d.step(T0 + minutes(1))) == []
    assert d.stage("dev").message == "after-gates: analysis errors: 1/2 measurements, 0 failed"
    _series(d, dev_0=m.Measurements(2, 0), dev_1=m.Measurements(2, 0))
    assert delivers(d.step(T0 + minutes(2))) == ["prod-0"]


def test_the_measurement_judging() -> None:
    assert m.Measurements(3, 1).passed(GATE)
    assert not m.Measurements(2, 0).passed(GATE)  # too few
    assert not m.Measurements(3, 2).passed(GATE)
    assert m.Measurements(2, 2).failed_for_good(GATE)  # past the limit before count: failed at once
    assert not m.Measurements(3, 1).failed_for_good(GATE)


def test_the_plan_describes_and_assumes_an_analysis() -> None:
    assert plan_report.describe_gate(GATE) == (
        "Analysis",
        "analysis errors: 3 measurements every 30s (assumed passing)",
    )

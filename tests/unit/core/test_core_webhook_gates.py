"""The Webhook gate (ADR 0080): the engine opens it only on a passing verdict the shell supplies."""

from __future__ import annotations

from core_helpers import DONE, T0, Driver, delivers, fleet, minutes, spec, stage

from fleetwave.core import model as m
from fleetwave.core import status as st
from fleetwave.translate import plan_report


def _two_stages(*after: m.Gate, **kw: object) -> Driver:
    return Driver(spec(stage("dev", after=after), stage("prod"), **kw), fleet(dev=2, prod=1))


def _delivered(d: Driver) -> None:
    d.step()
    d.complete_in_flight()


def test_a_stage_waits_for_its_webhook_then_moves_on_once_it_passes() -> None:
    d = _two_stages(m.Webhook("ready"))
    _delivered(d)
    decision = d.step(T0 + minutes(1))
    assert delivers(decision) == []
    assert d.stage("dev").message == "after-gates: waiting for webhook ready"
    assert decision.waiting_on_facts  # polled again: the shell calls the webhook
    d.webhooks[("dev", "ready")] = m.HealthVerdict(False, message="answered HTTP 503")
    d.step(T0 + minutes(2))
    assert d.stage("dev").message == "after-gates: webhook ready not passing: answered HTTP 503"
    assert d.status is not None
    assert d.status.phase is st.RolloutPhase.WAITING
    d.webhooks[("dev", "ready")] = m.HealthVerdict(True)
    decision = d.step(T0 + minutes(3))
    assert delivers(decision) == ["prod-0"]
    gate = d.stage("dev").gates[0]
    assert (gate.kind, gate.state, gate.message) == ("Webhook", st.GateState.PASSED, "webhook ready passed")


def test_a_verdict_for_another_stage_or_webhook_does_not_open_the_gate() -> None:
    d = _two_stages(m.Webhook("ready"), m.Webhook("second"))
    _delivered(d)
    d.webhooks[("prod", "ready")] = m.HealthVerdict(True)
    d.webhooks[("dev", "ready")] = m.HealthVerdict(True)
    decision = d.step(T0 + minutes(1))
    assert delivers(decision) == []
    assert d.stage("dev").message == "after-gates: waiting for webhook second"


def test_a_per_cluster_webhook_names_the_failing_cluster() -> None:
    d = _two_stages(m.Webhook("per", per_cluster=True))
    _delivered(d)
    failing = (("dev-1", "answered HTTP 500"),)
    d.webhooks[("dev", "per")] = m.HealthVerdict(False, "dev-1", "answered HTTP 500", failing)
    d.step(T0 + minutes(1))
    assert (
        d.stage("dev").message == "after-gates: webhook per not passing for cluster dev-1: answered HTTP 500"
    )


def test_a_webhook_holds_an_approval_that_is_already_granted() -> None:
    d = _two_stages(m.Webhook("ready"), m.Approval("dev-ok"))
    _delivered(d)
    d.approvals["dev-ok"] = T0
    assert delivers(d.step(T0 + minutes(1))) == []
    d.webhooks[("dev", "ready")] = m.HealthVerdict(True)
    assert delivers(d.step(T0 + minutes(2))) == ["prod-0"]


def test_a_per_cluster_webhook_failing_past_the_grace_sets_the_cluster_aside_within_budget() -> None:
    budget = m.FailureBudget(per_stage=m.FailureLimit(1), grace=minutes(1))
    d = _two_stages(m.Webhook("per", per_cluster=True), failure_budget=budget)
    d.step()
    d.delivery.update({"dev-0": DONE, "dev-1": DONE})
    failing = (("dev-1", "answered HTTP 500"),)
    d.webhooks[("dev", "per")] = m.HealthVerdict(False, "dev-1", "answered HTTP 500", failing)
    assert delivers(d.step(T0 + minutes(1))) == []
    decision = d.step(T0 + minutes(2))
    assert d.stage("dev").set_aside == (("dev-1", "webhook per: answered HTTP 500"),)
    assert delivers(decision) == ["prod-0"]


def test_a_stage_wide_webhook_never_counts_against_the_budget() -> None:
    budget = m.FailureBudget(per_stage=m.FailureLimit(1), grace=minutes(1))
    d = _two_stages(m.Webhook("ready"), failure_budget=budget)
    _delivered(d)
    d.webhooks[("dev", "ready")] = m.HealthVerdict(False, message="answered HTTP 500")
    for at in (1, 5, 30):
        assert delivers(d.step(T0 + minutes(at))) == []
    assert d.stage("dev").set_aside == ()
    assert d.status is not None
    assert d.status.phase is st.RolloutPhase.WAITING


def test_the_plan_describes_a_webhook_gate() -> None:
    assert plan_report.describe_gate(m.Webhook("ready")) == ("Webhook", "webhook ready (assumed passing)")
    assert plan_report.describe_gate(m.Webhook("per", per_cluster=True)) == (
        "Webhook",
        "webhook per per cluster (assumed passing)",
    )

"""State-machine edges of the engine, one sentence per test."""

from __future__ import annotations

from dataclasses import replace

import pytest
from core_helpers import (
    APPLYING,
    DONE,
    T0,
    Driver,
    delivered,
    delivers,
    events,
    fleet,
    minutes,
    run_until_stage,
    spec,
    stage,
)

from fleetwave.core import effects as fx
from fleetwave.core import model as m
from fleetwave.core import status as st

SP = st.StagePhase


def test_first_step_freezes_the_plan_and_starts_the_first_batch_only() -> None:
    d = Driver(spec(stage("dev", max_in_flight=m.MaxInFlight(2)), stage("prod")), fleet(dev=3, prod=2))
    decision = d.step()
    assert delivers(decision) == ["dev-0", "dev-1"]
    assert d.stage("dev").clusters == ("dev-0", "dev-1", "dev-2")
    assert d.stage("dev").batches == (("dev-0", "dev-1"), ("dev-2",))
    assert d.stage("prod").phase is SP.PENDING
    assert decision.status.condition("Initialized").status is st.ConditionStatus.TRUE  # type: ignore[union-attr]


def test_a_slot_frees_as_soon_as_one_cluster_is_done() -> None:
    d = Driver(spec(stage("dev", max_in_flight=m.MaxInFlight(2))), fleet(dev=3))
    d.step()
    d.delivery["dev-0"] = DONE
    d.delivery["dev-1"] = APPLYING
    assert delivers(d.step(T0 + minutes(1))) == ["dev-2"]


def test_delay_is_measured_from_stage_success_not_from_stage_start() -> None:
    d = Driver(spec(stage("dev", after=(m.Delay(minutes(5)),)), stage("prod")), fleet(dev=1, prod=1))
    d.step()
    d.complete_in_flight()
    decision = d.step(T0 + minutes(7))  # stage succeeded (observed) at +7
    assert d.stage("dev").phase is SP.WAITING_AFTER
    assert "waiting for delay until 2026-11-22T10:12:00Z" in d.stage("dev").message
    assert decision.requeue_at == T0 + minutes(12)
    assert decision.wake_at == T0 + minutes(12)
    assert (
        delivers(
            d.step(
                T0
                + minutes(
                    11,
                )
            )
        )
        == []
    )
    assert delivers(d.step(T0 + minutes(12))) == ["prod-0"]


def test_a_delay_edit_takes_effect_without_restarting() -> None:
    d = Driver(spec(stage("dev", after=(m.Delay(minutes(30)),)), stage("prod")), fleet(dev=1, prod=1))
    d.step()
    d.complete_in_flight()
    d.step(T0 + minutes(1))
    d.with_spec(spec(stage("dev", after=(m.Delay(minutes(2)),)), stage("prod")))
    decision = d.step(T0 + minutes(3))
    assert "Restarted" not in events(decision)
    assert delivers(decision) == ["prod-0"]


def test_manual_approval_waits_and_requests_approval() -> None:
    d = Driver(spec(stage("dev", after=(m.Approval("dev-ok"),)), stage("prod")), fleet(dev=1, prod=1))
    d.step()
    d.complete_in_flight()
    decision = d.step(T0 + minutes(1))
    assert fx.RequestApproval("dev", "dev-ok") in decision.effects
    assert d.stage("dev").message == "after-gates: waiting for approval dev-ok"
    assert decision.wake_at is None
    assert decision.requeue_at == T0 + minutes(1.5)
    d.approvals["dev-ok"] = T0 + minutes(2)
    assert delivers(d.step(T0 + minutes(2))) == ["prod-0"]


def test_automatic_reset_approval_only_promotes_once_health_checks_pass_again() -> None:
    gates = (m.HealthChecks(("smoke",)), m.Approval("dev-ok"))
    d = Driver(spec(stage("dev", after=gates), stage("prod")), fleet(dev=1, prod=1))
    d.step()
    d.complete_in_flight()
    d.health[("dev", "smoke")] = m.HealthVerdict(True)
    d.step(T0 + minutes(1))
    d.health[("dev", "smoke")] = m.HealthVerdict(False, "dev-0", "pod crashlooping")
    d.approvals["dev-ok"] = T0 + minutes(2)
    decision = d.step(T0 + minutes(2))
    assert delivers(decision) == []
    assert (
        d.stage("dev").message == "after-gates: health check smoke failing on cluster dev-0: pod crashlooping"
    )
    d.health[("dev", "smoke")] = m.HealthVerdict(True)
    decision = d.step(T0 + minutes(3))
    assert delivers(decision) == ["prod-0"]
    assert fx.ResetApproval("dev", "dev-ok") in decision.effects


def test_an_auto_reset_approval_from_an_older_revision_does_not_count_and_is_reset() -> None:
    d = Driver(spec(stage("dev", after=(m.Approval("dev-ok"),)), stage("prod")), fleet(dev=1, prod=1))
    d.approvals["dev-ok"] = T0 - minutes(60)
    d.step()
    d.complete_in_flight()
    decision = d.step(T0 + minutes(1))
    assert delivers(decision) == []
    assert fx.ResetApproval("dev", "dev-ok") in decision.effects


def test_a_sticky_approval_without_automatic_reset_keeps_promoting_across_revisions() -> None:
    gates = (m.Approval("dev-ok", auto_reset=False),)
    d = Driver(spec(stage("dev", after=gates), stage("prod")), fleet(dev=1, prod=1))
    d.approvals["dev-ok"] = T0 - minutes(60)
    d.step()
    d.complete_in_flight()
    decision = d.step(T0 + minutes(1))
    assert delivers(decision) == ["prod-0"]
    assert not any(isinstance(e, fx.ResetApproval) for e in decision.effects)


def test_a_before_stage_approval_blocks_the_stage_from_starting() -> None:
    d = Driver(spec(stage("dev"), stage("prod", before=(m.Approval("before-prod"),))), fleet(dev=1, prod=1))
    run_until_stage(d, "prod")
    assert d.stage("prod").phase is SP.WAITING_BEFORE
    assert delivers(d.last) == []  # type: ignore[arg-type]
    d.approvals["before-prod"] = T0 + minutes(5)
    assert delivers(d.step(T0 + minutes(5))) == ["prod-0"]


def test_content_change_restarts_from_the_first_stage() -> None:
    d = Driver(spec(stage("dev"), stage("prod")), fleet(dev=1, prod=1))
    run_until_stage(d, "prod")
    d.with_spec(spec(stage("dev"), stage("prod"), content="v2"))
    decision = d.step(T0 + minutes(5))
    assert "Restarted" in events(decision)
    assert d.status is not None
    assert d.status.current == 0
    assert d.status.started_at == T0 + minutes(5)
    assert delivers(decision) == ["dev-0"]


def test_a_cluster_admitted_while_already_running_the_revision_is_done_in_the_same_step() -> None:
    """A promotion writes its stage profile's summaries ahead: when the profile's pass admits a
    cluster the shell shows done at exactly this revision, the stage finishes in that pass (one
    status write, not a second one a pass later)."""
    d = Driver(spec(stage("dev"), content="v2"), fleet(dev=2))
    d.delivery = delivered(["dev-0", "dev-1"], m.Delivery(m.DeliveryPhase.APPLIED, ready=True, revision="v2"))
    decision = d.step()
    assert sorted(delivers(decision)) == ["dev-0", "dev-1"]  # still asked: level-triggered
    assert d.stage("dev").completed == 2
    assert d.status is not None
    assert d.status.phase is st.RolloutPhase.SUCCEEDED


@pytest.mark.parametrize(
    "shown",
    [
        m.Delivery(m.DeliveryPhase.APPLIED, ready=True),  # no revision shown: a pass later, as before
        m.Delivery(m.DeliveryPhase.APPLIED, ready=True, revision="v1"),  # the revision before
        m.Delivery(m.DeliveryPhase.APPLIED, ready=False, revision="v2"),  # not ready
    ],
)
def test_a_cluster_admitted_is_done_at_once_only_when_shown_ready_at_this_revision(shown: m.Delivery) -> None:
    d = Driver(spec(stage("dev"), content="v2"), fleet(dev=1))
    d.delivery = {"dev-0": shown}
    d.step()
    assert d.stage("dev").completed == 0
    assert "1 in flight" in d.stage("dev").message
    assert d.status is not None
    assert d.status.phase is not st.RolloutPhase.SUCCEEDED


def test_trigger_edit_never_restarts() -> None:
    d = Driver(spec(stage("dev"), stage("prod")), fleet(dev=1, prod=1))
    run_until_stage(d, "prod")
    d.with_spec(spec(stage("dev", after=(m.Approval("x"),)), stage("prod", before=(m.Delay(minutes(1)),))))
    decision = d.step(T0 + minutes(5))
    assert "Restarted" not in events(decision)
    assert d.status is not None
    assert d.status.current == 1


def test_stage_list_change_restarts_and_withdraws_clusters_no_longer_planned() -> None:
    d = Driver(spec(stage("dev"), stage("prod")), fleet(dev=1, prod=1))
    run_until_stage(d, "prod")
    d.with_spec(spec(stage("prod")))
    decision = d.step(T0 + minutes(5))
    assert fx.Withdraw("dev-0") in decision.effects
    assert [s.name for s in decision.status.stages] == ["prod"]


def test_a_failed_cluster_holds_its_stage_with_a_clear_message() -> None:
    d = Driver(spec(stage("dev", max_in_flight=m.MaxInFlight(1)), stage("prod")), fleet(dev=3, prod=1))
    d.step()
    d.delivery["dev-0"] = m.Delivery(m.DeliveryPhase.FAILED, message="helm: values invalid")
    decision = d.step(T0 + minutes(1))
    assert delivers(decision) == []
    assert d.stage("dev").message == "cluster dev-0 failed: helm: values invalid; stage held"
    assert "ClusterFailed" in events(decision)
    assert decision.status.phase is st.RolloutPhase.WAITING
    d.delivery["dev-0"] = DONE  # the shell's retry succeeded
    assert delivers(d.step(T0 + minutes(2))) == ["dev-1"]


def test_a_progress_deadline_turns_a_stall_into_a_reported_failure() -> None:
    d = Driver(spec(stage("dev"), progress_deadline=minutes(10)), fleet(dev=2))
    d.step()
    d.delivery["dev-0"] = DONE
    d.delivery["dev-1"] = APPLYING
    decision = d.step(T0 + minutes(3))
    assert decision.wake_at == T0 + minutes(13)
    decision = d.step(T0 + minutes(13))
    assert decision.status.phase is st.RolloutPhase.FAILED
    assert "ProgressDeadlineExceeded" in events(decision)
    assert "no progress since 2026-11-22T10:03:00Z" in decision.status.message
    again = d.step(T0 + minutes(20))
    assert again.effects == ()
    assert again.requeue_at is None


def test_a_failed_rollout_restarts_when_the_revision_changes() -> None:
    d = Driver(spec(stage("dev"), progress_deadline=minutes(1)), fleet(dev=1))
    d.step()
    d.step(T0 + minutes(2))
    assert d.status is not None
    assert d.status.phase is st.RolloutPhase.FAILED
    d.with_spec(spec(stage("dev"), content="v2", progress_deadline=minutes(1)))
    assert delivers(d.step(T0 + minutes(3))) == ["dev-0"]


def test_stage_completion_is_judged_against_the_frozen_members_not_observed_entries() -> None:
    d = Driver(spec(stage("dev", max_in_flight=m.MaxInFlight(1)), stage("prod")), fleet(dev=3, prod=1))
    d.step()
    d.delivery = {"dev-0": DONE}  # only one status object exists so far (Sveltos race Q2)
    decision = d.step(T0 + minutes(1))
    assert d.stage("dev").phase is SP.PROGRESSING
    assert delivers(decision) == ["dev-1"]


def test_a_cluster_leaving_mid_rollout_is_reported_and_no_longer_awaited() -> None:
    d = Driver(spec(stage("dev"), stage("prod")), fleet(dev=2, prod=1))
    d.step()
    d.delivery["dev-0"] = DONE
    d.fleet = m.Fleet.of(c for c in d.fleet.by_name.values() if c.name != "dev-1")
    decision = d.step(T0 + minutes(1))
    assert "ClusterLeft" in events(decision)
    assert decision.status.departed == ("dev-1",)
    assert d.stage("dev").clusters == ("dev-0", "dev-1")  # the plan is not reshuffled
    assert delivers(decision) == ["prod-0"]


def test_a_cluster_joining_mid_rollout_is_reported_and_delivered_only_after_its_stage_succeeded() -> None:
    d = Driver(spec(stage("dev"), stage("prod", after=(m.Approval("p"),))), fleet(dev=1, prod=1))
    d.step()
    d.fleet = m.Fleet.of([*d.fleet.by_name.values(), m.Cluster("late-dev", {"env": "dev"})])
    d.fleet = m.Fleet.of([*d.fleet.by_name.values(), m.Cluster("late-prod", {"env": "prod"})])
    decision = d.step(T0 + minutes(1))
    assert events(decision).count("ClusterJoined") == 2
    assert "late-dev" not in delivers(decision)
    d.complete_in_flight()
    decision = d.step(T0 + minutes(2))  # dev succeeded: its late joiner may now follow
    assert "late-dev" in delivers(decision)
    assert "late-prod" not in delivers(decision)
    assert d.stage("dev").clusters == ("dev-0",)
    assert decision.status.late_joiners == (("late-dev", 0), ("late-prod", 1))


def test_an_empty_stage_still_honours_its_gates_unless_told_to_skip_them() -> None:
    gated = Driver(spec(stage("none", after=(m.Approval("a"),)), stage("dev")), fleet(dev=1))
    assert delivers(gated.step()) == []
    assert gated.stage("none").phase is SP.WAITING_AFTER
    skipping = Driver(
        spec(stage("none", after=(m.Approval("a"),), skip_gates_when_empty=True), stage("dev")), fleet(dev=1)
    )
    assert delivers(skipping.step()) == ["dev-0"]


def test_a_not_ready_cluster_is_passed_over_but_still_awaited() -> None:
    clusters = [m.Cluster("dev-0", {"env": "dev"}, ready=False), m.Cluster("dev-1", {"env": "dev"})]
    d = Driver(spec(stage("dev", max_in_flight=m.MaxInFlight(1)), stage("prod")), m.Fleet.of(clusters))
    assert delivers(d.step()) == ["dev-1"]
    d.complete_in_flight()
    d.step(T0 + minutes(1))
    assert d.stage("dev").phase is SP.PROGRESSING
    assert "waiting for cluster dev-0 to become ready" in d.stage("dev").message
    d.fleet = m.Fleet.of([replace(clusters[0], ready=True), clusters[1]])
    assert delivers(d.step(T0 + minutes(2))) == ["dev-0"]


def test_pre_health_deployment_is_applied_after_the_delay_and_before_the_health_checks() -> None:
    gates = (m.Delay(minutes(5)), m.PreHealthDeployment("validate"), m.HealthChecks(("job-done",)))
    d = Driver(spec(stage("dev", after=gates), stage("prod")), fleet(dev=1, prod=1))
    d.step()
    d.complete_in_flight()
    decision = d.step(T0 + minutes(1))
    assert not any(isinstance(e, fx.DeployPreHealthCheck) for e in decision.effects)
    decision = d.step(T0 + minutes(6))
    assert fx.DeployPreHealthCheck("dev", "dev-0", "validate") in decision.effects
    assert d.stage("dev").message == "after-gates: waiting for health check job-done"
    d.health[("dev", "job-done")] = m.HealthVerdict(True)
    decision = d.step(T0 + minutes(7))
    assert fx.RemovePreHealthCheck("dev", "validate") in decision.effects
    assert delivers(decision) == ["prod-0"]


def test_a_closed_promotion_window_waits_until_it_opens() -> None:
    window = m.Window("0 20 * * *", "0 22 * * *")
    d = Driver(spec(stage("dev", after=(window,)), stage("prod")), fleet(dev=1, prod=1))
    d.step()
    d.complete_in_flight()
    decision = d.step(T0 + minutes(1))
    assert d.stage("dev").message == "after-gates: waiting for promotion window (opens 2026-11-22T20:00:00Z)"
    assert decision.wake_at == T0.replace(hour=20)
    assert delivers(d.step(T0.replace(hour=20))) == ["prod-0"]


def test_the_last_stage_succeeding_completes_the_rollout() -> None:
    d = Driver(spec(stage("dev")), fleet(dev=1))
    d.step()
    d.complete_in_flight()
    decision = d.step(T0 + minutes(1))
    assert decision.status.phase is st.RolloutPhase.SUCCEEDED
    assert decision.status.condition("Succeeded").status is st.ConditionStatus.TRUE  # type: ignore[union-attr]
    assert decision.requeue_at is None


def test_a_cluster_matching_no_stage_joins_silently_and_is_not_recorded() -> None:
    d = Driver(spec(stage("dev")), fleet(dev=1, qa=3))
    d.step()
    d.fleet = m.Fleet.of([*d.fleet.by_name.values(), m.Cluster("elsewhere", {"env": "qa"})])
    decision = d.step(T0 + minutes(1))
    assert "ClusterJoined" not in events(decision)
    assert decision.status.late_joiners == ()  # the record does not grow with the fleet (ADR 0144)


def test_a_cluster_outside_the_plan_that_comes_to_match_a_stage_joins_it() -> None:
    d = Driver(spec(stage("dev"), stage("prod", after=(m.Approval("p"),))), fleet(dev=1, qa=1))
    d.step()
    d.complete_in_flight()
    d.step(T0 + minutes(1))
    d.fleet = m.Fleet.of([m.Cluster("dev-0", {"env": "dev"}), m.Cluster("qa-0", {"env": "dev"})])
    decision = d.step(T0 + minutes(2))
    assert events(decision).count("ClusterJoined") == 1
    assert decision.status.late_joiners == (("qa-0", 0),)
    assert "qa-0" in delivers(decision)  # dev has succeeded: the new match follows it at once
    assert d.stage("dev").clusters == ("dev-0",)  # the plan is not reshuffled


def test_a_record_from_before_keeps_its_joiners_and_drops_the_clusters_matching_no_stage() -> None:
    d = Driver(spec(stage("dev")), fleet(dev=1, qa=1))
    d.step()
    assert d.status is not None
    d.status = replace(d.status, late_joiners=(("qa-0", -1), ("late-dev", 0)))
    d.fleet = m.Fleet.of([*d.fleet.by_name.values(), m.Cluster("late-dev", {"env": "dev"})])
    decision = d.step(T0 + minutes(1))
    assert "ClusterJoined" not in events(decision)  # late-dev was reported when it joined
    assert decision.status.late_joiners == (("late-dev", 0),)

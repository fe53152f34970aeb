"""Rollback (issue 13): a rollout that fails with onFailure Rollback, or that a person rolls back,
returns every cluster it touched to the last revision that succeeded, in reverse stage order, with
the stages' batching and health checks; clusters it never reached are never asked for anything."""

from __future__ import annotations

from datetime import datetime, timedelta

import hypothesis.strategies as hs
from core_helpers import DONE, T0, Driver, delivers, events, fleet, minutes, spec, stage
from hypothesis import given, settings

from fleetwave.controllers.shared import engine_state
from fleetwave.core import effects as fx
from fleetwave.core import engine
from fleetwave.core import model as m
from fleetwave.core import status as st

RP, SP = st.RolloutPhase, st.StagePhase
BROKEN = m.Delivery(m.DeliveryPhase.FAILED, message="helm: bad values")
V1 = m.RollbackTarget("v1", "revision 1")
NOW_FAIL = m.FailureBudget(grace=timedelta(0))


class RollbackDriver(Driver):
    """Like the shell: once a rollback began, deliveries are those of the target revision."""

    target: m.RollbackTarget | None = V1
    request: str = ""
    target_delivery: dict[str, m.Delivery]

    def step(self, at: datetime | None = None) -> fx.Decision:
        if at is not None:
            self.now = at
        rolling = self.status is not None and self.status.rollback is not None
        facts = self.target_delivery if rolling else self.delivery
        observed = m.Observed(facts, self.health, self.approvals, self.status, self.target, self.request)
        self.last = engine.step(self.spec, self.fleet, observed, self.now)
        self.status = self.last.status
        return self.last


def _driver(rollout: m.RolloutSpec, clusters: m.Fleet) -> RollbackDriver:
    d = RollbackDriver(rollout, clusters)
    d.target_delivery = {}
    return d


def _three_stages(**kw: object) -> m.RolloutSpec:
    return spec(
        stage("dev"),
        stage("staging"),
        stage("prod", max_in_flight=m.MaxInFlight(1)),
        content="v2",
        on_failure=m.OnFailure.ROLLBACK,
        failure_budget=NOW_FAIL,
        **kw,
    )


def _to_prod(d: RollbackDriver) -> None:
    d.step()
    for name in ("dev-0", "dev-1", "staging-0"):
        d.delivery[name] = DONE
    d.step(T0 + minutes(1))
    d.step(T0 + minutes(2))
    assert d.status is not None
    assert d.status.current_stage is not None
    assert d.status.current_stage.name == "prod"


def test_a_failed_prod_cluster_rolls_back_prod_then_staging_then_dev_touching_only_updated_clusters() -> None:
    d = _driver(_three_stages(), fleet(dev=2, staging=1, prod=3))
    _to_prod(d)
    assert d.stage("prod").started == ("prod-0",)
    d.delivery["prod-0"] = BROKEN
    began = d.step(T0 + minutes(3))
    assert began.status.phase is RP.ROLLING_BACK
    assert "RollingBack" in events(began)
    record = began.status.rollback
    assert record is not None
    assert [(s.name, s.clusters) for s in record.stages] == [
        ("prod", ("prod-0",)),
        ("staging", ("staging-0",)),
        ("dev", ("dev-0", "dev-1")),
    ]
    assert delivers(began) == ["prod-0"]  # prod-1 and prod-2 never had v2: never touched
    assert began.requeue_after == timedelta(0)  # read the target's deliveries at once
    d.target_delivery["prod-0"] = DONE
    assert delivers(d.step(T0 + minutes(4))) == ["staging-0"]
    d.target_delivery["staging-0"] = DONE
    assert sorted(delivers(d.step(T0 + minutes(5)))) == ["dev-0", "dev-1"]
    d.target_delivery.update({"dev-0": DONE, "dev-1": DONE})
    done = d.step(T0 + minutes(6))
    assert done.status.phase is RP.ROLLED_BACK
    assert "RolledBack" in events(done)
    succeeded = done.status.condition("Succeeded")
    assert succeeded is not None
    assert succeeded.reason is st.Reason.ROLLED_BACK
    assert "rolled back to revision 1" in done.status.message
    assert "failure budget exceeded" in done.status.message
    assert d.step(T0 + minutes(7)).status.phase is RP.ROLLED_BACK  # and stays there
    assert d.stage("prod").phase is SP.FAILED  # the forward record keeps what happened


def test_without_an_earlier_good_revision_the_rollout_fails_and_says_why() -> None:
    d = _driver(_three_stages(), fleet(dev=1, staging=1, prod=1))
    d.target = None
    d.step()
    d.delivery["dev-0"] = BROKEN
    failed = d.step(T0 + minutes(1))
    assert failed.status.phase is RP.FAILED
    assert "nothing to roll back to" in failed.status.message
    assert events(failed).count("RollbackImpossible") == 1
    assert "RollbackImpossible" not in events(d.step(T0 + minutes(2)))


def test_halt_stops_where_it_failed() -> None:
    d = _driver(spec(stage("dev"), content="v2", failure_budget=NOW_FAIL), fleet(dev=1))
    d.step()
    d.delivery["dev-0"] = BROKEN
    assert d.step(T0 + minutes(1)).status.phase is RP.FAILED


def test_a_person_rolls_back_a_succeeded_rollout_on_request() -> None:
    d = _driver(spec(stage("dev"), stage("prod"), content="v2"), fleet(dev=1, prod=1))
    d.step()
    d.delivery["dev-0"] = DONE
    d.step(T0 + minutes(1))
    d.delivery["prod-0"] = DONE
    assert d.step(T0 + minutes(2)).status.phase is RP.SUCCEEDED
    d.request = "requested with fleetwave rollback"
    began = d.step(T0 + minutes(3))
    assert delivers(began) == ["prod-0"]
    assert began.status.rollback is not None
    assert began.status.rollback.reason == d.request
    d.target_delivery["prod-0"] = DONE
    assert delivers(d.step(T0 + minutes(4))) == ["dev-0"]


def test_rollback_waits_for_no_gate_and_reports_the_health_it_sees() -> None:
    gates_ = (m.Delay(minutes(30)), m.Approval("ok"), m.HealthChecks(("probe",)))
    d = _driver(spec(stage("dev", after=gates_), stage("prod"), content="v2"), fleet(dev=1, prod=1))
    d.step()
    d.delivery["dev-0"] = DONE
    d.request = "aborted"
    d.step(T0 + minutes(1))
    d.target_delivery["dev-0"] = DONE
    d.health[("dev", "probe")] = m.HealthVerdict(False, "dev-0", "probe says no")
    done = d.step(T0 + minutes(2))
    assert done.status.phase is RP.ROLLED_BACK
    assert done.status.rollback is not None
    assert "probe says no" in done.status.rollback.stages[0].message
    said = [
        e.message for e in done.effects if isinstance(e, fx.Event) and e.reason == "RollbackStageSucceeded"
    ]
    assert any("probe says no" in message for message in said)


def test_a_check_that_fails_every_revision_never_strands_an_earlier_stage() -> None:
    """The forward rollout fails at staging's health check; the rollback puts staging back and then
    dev too, though the same check still fails (ADR 0078)."""
    checked = (m.HealthChecks(("wrong",)),)
    rollout = spec(
        stage("dev"),
        stage("staging", after=checked),
        content="v2",
        on_failure=m.OnFailure.ROLLBACK,
        failure_budget=NOW_FAIL,
    )
    d = _driver(rollout, fleet(dev=1, staging=1))
    d.step()
    d.delivery["dev-0"] = DONE
    d.step(T0 + minutes(1))
    d.delivery["staging-0"] = DONE
    d.health[("staging", "wrong")] = m.HealthVerdict(False, "staging-0", "always false")
    began = d.step(T0 + minutes(2))
    assert began.status.phase is RP.ROLLING_BACK
    d.target_delivery["staging-0"] = DONE
    assert delivers(d.step(T0 + minutes(3))) == ["dev-0"]
    d.target_delivery["dev-0"] = DONE
    assert d.step(T0 + minutes(4)).status.phase is RP.ROLLED_BACK


def test_a_failing_rollback_delivery_holds_its_stage_and_says_so() -> None:
    d = _driver(_three_stages(), fleet(dev=1, staging=1, prod=1))
    d.step()
    d.delivery["dev-0"] = BROKEN
    d.step(T0 + minutes(1))
    d.target_delivery["dev-0"] = BROKEN
    held = d.step(T0 + minutes(2))
    assert held.status.phase is RP.ROLLING_BACK
    progressing = held.status.condition("Progressing")
    assert progressing is not None
    assert progressing.reason is st.Reason.CLUSTER_FAILED
    assert "cluster dev-0 failed" in held.status.message
    # Where each cluster stands, for the person who has to look.
    assert "back on revision 1: none; still on the failed revision: none" in held.status.message
    assert "failed to roll back: dev-0" in held.status.message


def test_a_held_rollback_names_the_clusters_still_on_the_failed_revision() -> None:
    """prod fails forward; rolling back, staging's second cluster fails to go back: prod is back,
    staging-1 is not, dev (not reached yet) still runs the failed revision."""
    d = _driver(_three_stages(), fleet(dev=1, staging=2, prod=1))
    d.step()
    d.delivery["dev-0"] = DONE
    d.step(T0 + minutes(1))
    d.delivery |= {"staging-0": DONE, "staging-1": DONE}
    d.step(T0 + minutes(2))
    d.delivery["prod-0"] = BROKEN
    assert d.step(T0 + minutes(3)).status.phase is RP.ROLLING_BACK
    d.target_delivery |= {"prod-0": DONE, "staging-0": DONE, "staging-1": BROKEN}
    d.step(T0 + minutes(4))
    held = d.step(T0 + minutes(5))
    assert held.status.phase is RP.ROLLING_BACK
    message = held.status.message
    assert "back on revision 1: prod-0, staging-0; still on the failed revision: dev-0" in message
    assert "failed to roll back: staging-1" in message


def test_a_paused_rollback_starts_no_new_stage() -> None:
    d = _driver(_three_stages(), fleet(dev=1, staging=1, prod=1))
    _to_prod_small(d)
    d.delivery["prod-0"] = BROKEN
    d.step(T0 + minutes(3))
    d.spec = _three_stages(paused=True)
    d.target_delivery["prod-0"] = DONE
    paused = d.step(T0 + minutes(4))
    assert delivers(paused) == []
    assert paused.status.rollback is not None
    assert paused.status.rollback.current == 1
    d.spec = _three_stages()
    assert delivers(d.step(T0 + minutes(5))) == ["staging-0"]


def _to_prod_small(d: RollbackDriver) -> None:
    d.step()
    d.delivery["dev-0"] = DONE
    d.step(T0 + minutes(1))
    d.delivery["staging-0"] = DONE
    d.step(T0 + minutes(2))


def test_a_health_check_failing_past_the_grace_fails_the_cluster_and_rolls_back() -> None:
    rollout = spec(
        stage("dev"),
        stage("prod", after=(m.HealthChecks(("limits",)),)),
        content="v2",
        on_failure=m.OnFailure.ROLLBACK,
        failure_budget=m.FailureBudget(grace=minutes(2)),
    )
    d = _driver(rollout, fleet(dev=1, prod=2))
    d.step()
    d.delivery["dev-0"] = DONE
    d.step(T0 + minutes(1))
    d.delivery.update({"prod-0": DONE, "prod-1": DONE})
    bad = (("prod-1", "maxConnections 500 > 100"),)
    d.health[("prod", "limits")] = m.HealthVerdict(False, "prod-1", "maxConnections 500 > 100", bad)
    within = d.step(T0 + minutes(2))
    assert within.status.phase is RP.WAITING
    assert within.wake_at == T0 + minutes(4)
    began = d.step(T0 + minutes(4))
    assert began.status.phase is RP.ROLLING_BACK
    assert "prod-1: health check limits: maxConnections 500 > 100" in began.status.rollback.reason  # type: ignore[union-attr]


def test_a_health_failure_within_budget_sets_the_cluster_aside_and_the_gate_opens() -> None:
    rollout = spec(
        stage("prod", after=(m.HealthChecks(("limits",)),)),
        content="v2",
        failure_budget=m.FailureBudget(per_stage=m.FailureLimit(1), grace=minutes(1)),
    )
    d = _driver(rollout, fleet(prod=2))
    d.step()
    d.delivery.update({"prod-0": DONE, "prod-1": DONE})
    bad = (("prod-1", "too many"),)
    d.health[("prod", "limits")] = m.HealthVerdict(False, "prod-1", "too many", bad)
    assert d.step(T0 + minutes(1)).status.phase is RP.WAITING
    done = d.step(T0 + minutes(2))
    assert d.stage("prod").set_aside == (("prod-1", "health check limits: too many"),)
    assert done.status.phase is RP.SUCCEEDED


def test_the_rollback_record_round_trips_through_status() -> None:
    d = _driver(_three_stages(), fleet(dev=2, staging=1, prod=3))
    _to_prod(d)
    d.delivery["prod-0"] = BROKEN
    d.step(T0 + minutes(3))
    assert d.status is not None
    assert engine_state.load(engine_state.dump(d.status)) == d.status


@settings(max_examples=60, deadline=None)
@given(
    sizes=hs.lists(hs.integers(0, 4), min_size=1, max_size=4),
    width=hs.integers(1, 3),
    fail_at=hs.integers(0, 12),
    flaky=hs.sets(hs.integers(0, 12), max_size=4),
    manual=hs.booleans(),
)
def test_a_rollback_never_touches_a_cluster_outside_the_updated_set_and_never_runs_forward(
    sizes: list[int], width: int, fail_at: int, flaky: set[int], manual: bool
) -> None:
    names = [f"s{i}" for i in range(len(sizes))]
    stages = tuple(stage(n, max_in_flight=m.MaxInFlight(width)) for n in names)
    clusters = fleet(**dict(zip(names, sizes, strict=True)))
    d = _driver(
        spec(*stages, content="v2", on_failure=m.OnFailure.ROLLBACK, failure_budget=NOW_FAIL), clusters
    )
    at = T0
    began: st.RolloutStatus | None = None
    for i in range(60):
        at += minutes(1)
        decision = d.step(at)
        if decision.status.rollback is not None:
            began = decision.status
            break
        for s in decision.status.stages:
            for name in s.started:
                if name not in d.delivery or d.delivery[name] is not DONE:
                    d.delivery[name] = BROKEN if (i == fail_at and not manual) else DONE
        if manual and i == fail_at:
            d.request = "aborted"
        if decision.status.phase is RP.SUCCEEDED and not manual:
            return  # nothing failed: nothing to roll back
    if began is None:
        return
    touched = {c for s in began.stages for c in s.started}
    forward = began.stages
    order = {n: i for i, n in enumerate(names)}
    last_index = len(names)
    asked: set[str] = set()
    for j in range(80):
        last = d.last
        assert last is not None
        decision = last
        for effect in decision.effects:
            if isinstance(effect, fx.Deliver):
                assert effect.cluster in touched
                assert order[effect.stage] <= last_index  # stages only ever go backwards
                last_index = order[effect.stage]
                asked.add(effect.cluster)
        assert decision.status.stages == forward  # the forward record never moves again
        if decision.status.phase is RP.ROLLED_BACK:
            assert asked == touched
            return
        for name in touched:  # deliveries of the target: some retried once
            d.target_delivery[name] = BROKEN if (j in flaky and name not in d.target_delivery) else DONE
        at += minutes(1)
        d.step(at)
    raise AssertionError("the rollback never finished")


def test_a_rolled_back_stage_reads_its_checks_once_and_never_waits_past_the_bound() -> None:
    """The shell reads a stage's checks only while the record shows it waiting after delivery, so a
    rolled-back stage with checks takes one more pass to report what they see; a check that never
    answers holds it no longer than the bound."""
    checked = (m.HealthChecks(("probe",)),)
    d = _driver(spec(stage("dev", after=checked), stage("prod"), content="v2"), fleet(dev=1, prod=1))
    d.step()
    d.delivery["dev-0"] = DONE
    d.health[("dev", "probe")] = m.HealthVerdict(True)
    d.step(T0 + minutes(1))
    d.request = "aborted"
    d.health.clear()
    d.step(T0 + minutes(2))
    d.target_delivery |= {"dev-0": DONE, "prod-0": DONE}
    d.step(T0 + minutes(3))
    reading = d.step(T0 + minutes(4))
    assert reading.status.phase is RP.ROLLING_BACK
    assert reading.wake_at == T0 + minutes(4)  # come back at once to read the checks
    d.health[("dev", "probe")] = m.HealthVerdict(False, "dev-0", "probe says no")
    done = d.step(T0 + minutes(4) + timedelta(seconds=1))
    assert done.status.phase is RP.ROLLED_BACK
    assert done.status.rollback is not None
    assert (
        done.status.rollback.stages[-1].message
        == "rolled back (health check probe failing on cluster dev-0: probe says no)"
    )
    # Never answered: past the bound the stage is rolled back all the same.
    d2 = _driver(spec(stage("dev", after=checked), content="v2"), fleet(dev=1))
    d2.step()
    d2.delivery["dev-0"] = DONE
    d2.request = "aborted"
    d2.step(T0 + minutes(1))
    d2.target_delivery["dev-0"] = DONE
    assert d2.step(T0 + minutes(2)).status.phase is RP.ROLLING_BACK
    assert d2.step(T0 + minutes(2) + timedelta(seconds=29)).status.phase is RP.ROLLING_BACK
    assert d2.step(T0 + minutes(3)).status.phase is RP.ROLLED_BACK
    record = d2.status.rollback if d2.status else None
    assert record is not None
    assert record.stages[-1].message == "rolled back (no verdict from its health checks within 30 s)"

"""The failure budget (issue 13): failed clusters are set aside within the stage's and the rollout's
limits and the rollout carries on; the first one past a limit stops it, naming every failed cluster.
A failure that clears within the grace period never counts. No budget: today's rule (held)."""

from __future__ import annotations

from datetime import timedelta

import hypothesis.strategies as hs
from core_helpers import DONE, T0, Driver, delivers, fleet, minutes, spec, stage
from hypothesis import given, settings

from fleetwave.core import model as m
from fleetwave.core import status as st

SP = st.StagePhase
BROKEN = m.Delivery(m.DeliveryPhase.FAILED, message="helm: bad values")


def _budget(
    per_stage: int | str | None = None, total: int | str | None = None, grace: float = 2
) -> m.FailureBudget:
    return m.FailureBudget(
        per_stage=None if per_stage is None else m.FailureLimit.parse(per_stage),
        total=None if total is None else m.FailureLimit.parse(total),
        grace=minutes(grace),
    )


def test_limits_count_or_round_a_percentage_down() -> None:
    assert m.FailureLimit.parse(2).allowed(100) == 2
    assert m.FailureLimit.parse("10%").allowed(25) == 2
    assert m.FailureLimit.parse("10%").allowed(5) == 0
    assert m.FailureLimit.parse("0").allowed(7) == 0


def test_a_failed_cluster_within_budget_is_set_aside_after_the_grace_and_the_stage_goes_on() -> None:
    d = Driver(
        spec(
            stage("dev", max_in_flight=m.MaxInFlight(1)), stage("prod"), failure_budget=_budget(per_stage=1)
        ),
        fleet(dev=3, prod=1),
    )
    assert delivers(d.step()) == ["dev-0"]
    d.delivery["dev-0"] = BROKEN
    held = d.step(T0 + minutes(1))
    assert delivers(held) == []  # within the grace: held, as without a budget
    assert held.wake_at == T0 + minutes(3)  # when the grace period of dev-0 ends
    carried_on = d.step(T0 + minutes(3))
    assert delivers(carried_on) == ["dev-1"]  # its slot is free in the same step
    assert d.stage("dev").set_aside == (("dev-0", "helm: bad values"),)
    assert any(getattr(e, "reason", "") == "ClusterSetAside" for e in carried_on.effects)
    d.delivery["dev-1"] = DONE
    assert delivers(d.step(T0 + minutes(4))) == ["dev-2"]
    d.delivery["dev-2"] = DONE
    assert delivers(d.step(T0 + minutes(5))) == ["prod-0"]
    assert d.stage("dev").phase is SP.SUCCEEDED


def test_a_failure_that_clears_within_the_grace_never_counts() -> None:
    d = Driver(spec(stage("dev"), failure_budget=_budget(per_stage=0)), fleet(dev=1))
    d.step()
    d.delivery["dev-0"] = BROKEN
    d.step(T0 + minutes(1))
    d.delivery["dev-0"] = DONE  # a retry worked
    decision = d.step(T0 + minutes(2.5))
    assert decision.status.phase is st.RolloutPhase.SUCCEEDED
    assert d.stage("dev").set_aside == ()
    assert d.stage("dev").failing_since == ()


def test_the_first_cluster_past_the_stage_limit_stops_the_rollout_naming_every_failed_one() -> None:
    d = Driver(
        spec(
            stage("dev", max_in_flight=m.MaxInFlight(2)), stage("prod"), failure_budget=_budget(per_stage=1)
        ),
        fleet(dev=4, prod=1),
    )
    d.step()
    d.delivery["dev-0"] = BROKEN
    d.delivery["dev-1"] = m.Delivery(m.DeliveryPhase.FAILED, message="timed out")
    d.step(T0 + minutes(1))  # both seen failing: their grace periods start
    stopped = d.step(T0 + minutes(3))
    assert stopped.status.phase is st.RolloutPhase.FAILED
    cond = stopped.status.condition("Progressing")
    assert cond is not None
    assert cond.reason is st.Reason.FAILURE_BUDGET_EXCEEDED
    assert d.stage("dev").message == (
        "failure budget exceeded: 2 failed clusters in stage dev, 1 allowed "
        "(dev-0: helm: bad values; dev-1: timed out)"
    )
    assert delivers(d.step(T0 + minutes(4))) == []  # stopped: nothing else starts
    assert d.stage("prod").phase is SP.PENDING


def test_the_rollout_limit_counts_failures_across_stages() -> None:
    d = Driver(
        spec(stage("dev"), stage("prod"), failure_budget=_budget(per_stage=1, total=1)),
        fleet(dev=2, prod=2),
    )
    d.step()
    d.delivery["dev-0"] = BROKEN
    d.delivery["dev-1"] = DONE
    d.step(T0 + minutes(1))
    moved_on = d.step(T0 + minutes(3))
    assert d.stage("dev").phase is SP.SUCCEEDED  # one set aside: within both limits
    assert delivers(moved_on) == ["prod-0", "prod-1"]
    d.delivery["prod-0"] = BROKEN
    d.step(T0 + minutes(4))
    stopped = d.step(T0 + minutes(6))
    assert stopped.status.phase is st.RolloutPhase.FAILED
    assert "2 failed clusters in the rollout, 1 allowed" in d.stage("prod").message


def test_without_a_budget_a_failed_cluster_holds_the_stage_as_before() -> None:
    d = Driver(spec(stage("dev", max_in_flight=m.MaxInFlight(1))), fleet(dev=2))
    d.step()
    d.delivery["dev-0"] = BROKEN
    held = d.step(T0 + minutes(30))
    assert delivers(held) == []
    assert held.status.phase is st.RolloutPhase.WAITING
    assert d.stage("dev").set_aside == ()


@settings(max_examples=80, deadline=None)
@given(
    outcomes=hs.lists(hs.sampled_from(["done", "broken"]), min_size=1, max_size=8),
    per_stage=hs.one_of(hs.none(), hs.integers(min_value=0, max_value=4)),
    width=hs.integers(min_value=1, max_value=4),
)
def test_property_never_more_set_aside_than_allowed_and_stopping_names_a_cluster_over_it(
    outcomes: list[str], per_stage: int | None, width: int
) -> None:
    n = len(outcomes)
    d = Driver(
        spec(
            stage("dev", max_in_flight=m.MaxInFlight(width)),
            failure_budget=_budget(per_stage=per_stage, grace=1),
        ),
        fleet(dev=n),
    )
    at = T0
    for _ in range(3 * n + 3):
        decision = d.step(at)
        for name in d.stage("dev").started:
            outcome = outcomes[int(name.split("-")[1])]
            d.delivery[name] = DONE if outcome == "done" else BROKEN
        at += timedelta(minutes=1)
        allowed = 0 if per_stage is None else per_stage
        assert len(d.stage("dev").set_aside) <= allowed
        assert {c for c, _ in d.stage("dev").set_aside} <= {
            f"dev-{i}" for i, o in enumerate(outcomes) if o == "broken"
        }
        if decision.status.phase is st.RolloutPhase.FAILED:
            assert d.stage("dev").over_budget
            assert outcomes.count("broken") > allowed
            break
    assert d.status is not None
    over = outcomes.count("broken") > (0 if per_stage is None else per_stage)
    assert d.status.phase is (st.RolloutPhase.FAILED if over else st.RolloutPhase.SUCCEEDED)


def test_stopping_on_the_rollout_limit_names_the_clusters_set_aside_in_earlier_stages() -> None:
    d = Driver(spec(stage("dev"), stage("prod"), failure_budget=_budget(total=1)), fleet(dev=1, prod=1))
    d.step()
    d.delivery["dev-0"] = BROKEN
    d.step(T0 + minutes(1))
    d.step(T0 + minutes(3))  # dev-0 set aside; prod starts
    d.delivery["prod-0"] = m.Delivery(m.DeliveryPhase.FAILED, message="timed out")
    d.step(T0 + minutes(4))
    d.step(T0 + minutes(6))
    assert d.stage("prod").message == (
        "failure budget exceeded: 2 failed clusters in the rollout, 1 allowed "
        "(dev-0: helm: bad values; prod-0: timed out)"
    )


SLOW = m.Delivery(m.DeliveryPhase.APPLIED, ready=False, message="Deployment web: 0/1 replicas available")


def test_a_cluster_unavailable_past_the_progress_deadline_is_failed_and_set_aside_within_budget() -> None:
    d = Driver(
        spec(
            stage("dev", max_in_flight=m.MaxInFlight(2)),
            stage("prod"),
            failure_budget=_budget(per_stage=1),
            progress_deadline=minutes(10),
        ),
        fleet(dev=2, prod=1),
    )
    d.step()
    d.delivery["dev-0"] = SLOW
    d.delivery["dev-1"] = DONE
    waiting = d.step(T0 + minutes(1))
    assert d.stage("dev").unready_since == (("dev-0", T0 + minutes(1)),)
    # Its deadline counts from the stage's last progress (T0 + 1 min, when dev-1 became done): the
    # engine wakes by then.
    assert waiting.wake_at is not None
    assert waiting.wake_at <= T0 + minutes(11)
    assert delivers(d.step(T0 + minutes(10))) == []
    moved_on = d.step(T0 + minutes(11))
    assert d.stage("dev").set_aside == (
        ("dev-0", "not available for more than 0:10:00: Deployment web: 0/1 replicas available"),
    )
    assert d.stage("dev").phase is SP.SUCCEEDED  # not the stage deadline: the cluster alone failed
    assert delivers(moved_on) == ["prod-0"]


def test_a_cluster_unavailable_past_the_deadline_exceeds_a_zero_budget_naming_it() -> None:
    d = Driver(
        spec(stage("dev"), failure_budget=_budget(per_stage=0), progress_deadline=minutes(5)),
        fleet(dev=1),
    )
    d.step()
    d.delivery["dev-0"] = SLOW
    d.step(T0 + minutes(1))
    stopped = d.step(T0 + minutes(6))
    assert stopped.status.phase is st.RolloutPhase.FAILED
    assert d.stage("dev").over_budget
    assert "dev-0: not available for more than 0:05:00" in d.stage("dev").message


def test_a_cluster_that_becomes_available_before_its_deadline_never_counts() -> None:
    d = Driver(
        spec(stage("dev"), failure_budget=_budget(per_stage=0), progress_deadline=minutes(5)),
        fleet(dev=1),
    )
    d.step()
    d.delivery["dev-0"] = SLOW
    d.step(T0 + minutes(1))
    d.delivery["dev-0"] = DONE
    assert d.step(T0 + minutes(4)).status.phase is st.RolloutPhase.SUCCEEDED
    assert d.stage("dev").set_aside == ()

"""Pausing a rollout (issue 13): clusters in flight finish, nothing new starts — no cluster, no stage,
no late joiner — gate timers keep their start, the progress deadline does not run, and resuming goes
on from where it was without restarting."""

from __future__ import annotations

from dataclasses import replace

import hypothesis.strategies as hs
from core_helpers import APPLYING, DONE, T0, Driver, delivers, fleet, minutes, spec, stage
from hypothesis import given, settings

from fleetwave.core import model as m
from fleetwave.core import status as st

SP = st.StagePhase


def _paused(d: Driver, paused: bool = True) -> None:
    d.with_spec(replace(d.spec, paused=paused))


def test_a_paused_stage_lets_its_clusters_in_flight_finish_and_starts_no_other() -> None:
    d = Driver(spec(stage("dev", max_in_flight=m.MaxInFlight(2)), stage("prod")), fleet(dev=4, prod=1))
    assert delivers(d.step()) == ["dev-0", "dev-1"]
    _paused(d)
    d.delivery["dev-0"] = DONE
    d.delivery["dev-1"] = APPLYING
    decision = d.step(T0 + minutes(1))
    assert delivers(decision) == []  # a free slot, and still nothing new
    assert decision.status.phase is st.RolloutPhase.PAUSED
    progressing = decision.status.condition("Progressing")
    assert progressing is not None
    assert (progressing.status, progressing.reason) == (st.ConditionStatus.FALSE, st.Reason.PAUSED)
    assert decision.status.message.startswith("paused: stage dev: delivering: 1/4 clusters done")
    d.delivery["dev-1"] = DONE
    assert delivers(d.step(T0 + minutes(2))) == []
    assert d.stage("dev").started == ("dev-0", "dev-1")
    _paused(d, False)
    resumed = d.step(T0 + minutes(3))
    assert delivers(resumed) == ["dev-2", "dev-3"]
    assert resumed.status.phase is st.RolloutPhase.PROGRESSING
    assert not any(e.reason == "Restarted" for e in resumed.effects if hasattr(e, "reason"))


def test_a_finished_stage_does_not_hand_over_to_the_next_while_paused() -> None:
    d = Driver(spec(stage("dev"), stage("prod")), fleet(dev=1, prod=1))
    d.step()
    _paused(d)
    d.complete_in_flight()
    d.step(T0 + minutes(1))
    assert d.stage("dev").phase is SP.SUCCEEDED  # finishing is not starting anything
    assert d.stage("prod").phase is SP.PENDING
    assert d.stage("prod").entered_at is None
    _paused(d, False)
    assert delivers(d.step(T0 + minutes(2))) == ["prod-0"]


def test_gate_timers_keep_their_start_across_a_pause() -> None:
    d = Driver(spec(stage("dev", after=(m.Delay(minutes(10)),)), stage("prod")), fleet(dev=1, prod=1))
    d.step()
    d.complete_in_flight()
    d.step(T0 + minutes(1))  # delivered at +1: the delay ends at +11
    _paused(d)
    d.step(T0 + minutes(5))
    _paused(d, False)
    assert delivers(d.step(T0 + minutes(12))) == ["prod-0"]  # not +5 + 10: the timer kept its start


def test_before_gates_that_open_while_paused_do_not_start_the_stage() -> None:
    d = Driver(spec(stage("dev", before=(m.Delay(minutes(1)),))), fleet(dev=2))
    d.step()
    _paused(d)
    decision = d.step(T0 + minutes(2))
    assert delivers(decision) == []
    assert d.stage("dev").phase is SP.WAITING_BEFORE
    assert d.stage("dev").message == "before-gates open; paused"
    _paused(d, False)
    assert delivers(d.step(T0 + minutes(3))) == ["dev-0", "dev-1"]


def test_the_progress_deadline_neither_fails_a_paused_rollout_nor_counts_the_pause() -> None:
    d = Driver(
        spec(stage("dev", max_in_flight=m.MaxInFlight(1)), progress_deadline=minutes(10)), fleet(dev=2)
    )
    d.step()
    d.delivery["dev-0"] = DONE
    _paused(d)
    d.step(T0 + minutes(1))
    paused_long = d.step(T0 + minutes(60))
    assert paused_long.status.phase is st.RolloutPhase.PAUSED
    _paused(d, False)
    resumed = d.step(T0 + minutes(61))
    assert delivers(resumed) == ["dev-1"]
    d.delivery["dev-1"] = APPLYING
    assert d.step(T0 + minutes(70)).status.phase is not st.RolloutPhase.FAILED  # 9 min since resuming
    assert d.step(T0 + minutes(72)).status.phase is st.RolloutPhase.FAILED  # stuck for 11


def test_a_cluster_that_joins_while_paused_waits_for_the_resume() -> None:
    d = Driver(spec(stage("dev")), fleet(dev=1))
    d.step()
    d.complete_in_flight()
    d.step(T0 + minutes(1))
    _paused(d)
    d.fleet = fleet(dev=2)
    assert delivers(d.step(T0 + minutes(2))) == []
    _paused(d, False)
    assert delivers(d.step(T0 + minutes(3))) == ["dev-1"]


@settings(max_examples=60, deadline=None)
@given(
    sizes=hs.lists(hs.integers(min_value=1, max_value=4), min_size=1, max_size=3),
    width=hs.integers(min_value=1, max_value=3),
    pause_after=hs.integers(min_value=0, max_value=6),
    steps=hs.integers(min_value=1, max_value=6),
)
def test_property_nothing_starts_while_paused(
    sizes: list[int], width: int, pause_after: int, steps: int
) -> None:
    """Whatever the fleet and wherever the pause falls, a paused rollout never asks for a delivery to
    a cluster it had not started, and never enters a stage."""
    envs = {f"s{i}": n for i, n in enumerate(sizes)}
    d = Driver(spec(*(stage(name, max_in_flight=m.MaxInFlight(width)) for name in envs)), fleet(**envs))
    at = T0
    for _ in range(pause_after):
        at += minutes(1)
        d.step(at)
        d.complete_in_flight()
    _paused(d)
    d.step(at)
    assert d.status is not None
    started = {c for s in d.status.stages for c in s.started}
    entered = {s.name for s in d.status.stages if s.phase is not SP.PENDING}
    for _ in range(steps):
        at += minutes(1)
        d.complete_in_flight()
        decision = d.step(at)
        assert set(delivers(decision)) <= started
        assert {s.name for s in decision.status.stages if s.phase is not SP.PENDING} == entered
        assert {c for s in decision.status.stages for c in s.started} == started


def test_resuming_restarts_the_deadline_even_when_nothing_moves_at_once() -> None:
    d = Driver(spec(stage("dev"), progress_deadline=minutes(10)), fleet(dev=1))
    d.step()
    d.delivery["dev-0"] = APPLYING  # in flight through the whole pause
    _paused(d)
    d.step(T0 + minutes(1))
    d.step(T0 + minutes(30))
    _paused(d, False)
    assert d.step(T0 + minutes(31)).status.phase is not st.RolloutPhase.FAILED
    assert d.step(T0 + minutes(40)).status.phase is not st.RolloutPhase.FAILED
    assert d.step(T0 + minutes(42)).status.phase is st.RolloutPhase.FAILED

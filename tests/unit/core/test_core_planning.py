"""Selectors, ordering, percent rounding, windows (DST) and the timeline simulator."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from core_helpers import T0, env, fleet, minutes, spec, stage

from fleetwave.core import batching, selectors, timeline, windows
from fleetwave.core import model as m

Op = m.Operator


@pytest.mark.parametrize(
    ("requirement", "labels", "expected"),
    [
        (m.Requirement("env", Op.IN, ("a", "b")), {"env": "b"}, True),
        (m.Requirement("env", Op.IN, ("a",)), {}, False),
        (m.Requirement("env", Op.NOT_IN, ("a",)), {}, True),
        (m.Requirement("env", Op.NOT_IN, ("a",)), {"env": "a"}, False),
        (m.Requirement("env", Op.EXISTS), {"env": ""}, True),
        (m.Requirement("env", Op.DOES_NOT_EXIST), {"env": "a"}, False),
    ],
)
def test_match_expressions_follow_kubernetes_semantics(
    requirement: m.Requirement, labels: dict[str, str], expected: bool
) -> None:
    assert selectors.matches(m.Selector(match_expressions=(requirement,)), labels) is expected


def test_an_empty_selector_matches_all_and_a_missing_selector_matches_none() -> None:
    assert selectors.matches(m.Selector(), {"any": "thing"})
    assert not selectors.matches(None, {"any": "thing"})


def test_sorting_label_orders_numbers_numerically_then_strings_then_unlabelled_then_by_name() -> None:
    labels = {"a": "10", "b": "9", "c": "x", "d": None, "e": "9", "f": "-1"}
    clusters = [m.Cluster(n, {"order": v} if v is not None else {}) for n, v in labels.items()]
    assert batching.order_members(m.StageSpec("s", m.Selector(), "order"), clusters) == (
        "f", "b", "e", "a", "c", "d",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("limit", "members", "expected"),
    [
        ("25%", 10, 2),
        ("5%", 10, 1),
        ("100%", 7, 7),
        ("0%", 7, 7),
        (0, 7, 7),
        (None, 7, 7),
        (3, 2, 2),
        ("50%", 0, 0),
    ],
)
def test_percentages_round_down_with_a_minimum_of_one_and_zero_means_all(
    limit: int | str | None, members: int, expected: int
) -> None:
    assert batching.resolve_max_in_flight(m.MaxInFlight.parse(limit), members) == expected


@pytest.mark.parametrize(
    ("limit", "members", "expected"),
    [("25%", 10, 3), ("5%", 10, 1), ("34%", 3, 2), ("100%", 7, 7), ("0%", 7, 7), ("10%", 25, 3)],
)
def test_sveltos_maxupdate_percentages_round_up(limit: str, members: int, expected: int) -> None:
    # Sveltos: ceil(P/100 * matching clusters) (shared/spec/sveltos-promotion.md, maxUpdate).
    assert batching.resolve_max_in_flight(m.MaxInFlight.parse(limit, round_up=True), members) == expected


def test_the_first_matching_stage_claims_a_cluster_and_unmatched_clusters_are_counted() -> None:
    s = spec(m.StageSpec("all", m.Selector()), stage("dev"))
    plan = batching.freeze_plan(s, fleet(dev=2), T0)
    assert plan.stages[0].clusters == ("dev-0", "dev-1")
    assert plan.stages[1].clusters == ()
    plan = batching.freeze_plan(spec(stage("prod")), fleet(dev=2, prod=1), T0)
    assert plan.unmatched == 2


def test_stage_hash_ignores_gates_and_pace_but_not_selectors() -> None:
    base = (m.StageSpec("dev", env("dev")),)
    paced = (m.StageSpec("dev", env("dev"), max_in_flight=m.MaxInFlight(1), after=(m.Approval("x"),)),)
    moved = (m.StageSpec("dev", env("prod")),)
    assert batching.compute_stages_hash(base) == batching.compute_stages_hash(paced)
    assert batching.compute_stages_hash(base) != batching.compute_stages_hash(moved)


@pytest.mark.parametrize(
    ("window", "now", "is_open", "changes_at"),
    [  # the Sveltos unit-test cases, in UTC
        (m.Window("0 10 * * *", "0 11 * * *"), datetime(2026, 1, 6, 10, 5), True, datetime(2026, 1, 6, 11)),
        (m.Window("0 20 * * *", "0 22 * * *"), datetime(2026, 1, 6, 19, 30), False, datetime(2026, 1, 6, 20)),
        (
            m.Window("0 10 * * 6", "0 22 * * 0"),
            datetime(2026, 1, 6, 17, 30),
            False,
            datetime(2026, 1, 10, 10),
        ),
        (m.Window("0 10 * * *", "0 11 * * *"), datetime(2026, 1, 6, 10, 0), True, datetime(2026, 1, 6, 11)),
        (m.Window("0 10 * * *", "0 11 * * *"), datetime(2026, 1, 6, 11, 0), False, datetime(2026, 1, 7, 10)),
    ],
)
def test_promotion_window_opens_at_from_and_closes_at_the_next_to(
    window: m.Window, now: datetime, is_open: bool, changes_at: datetime
) -> None:
    state = windows.window_state(window, now.replace(tzinfo=UTC))
    assert (state.open, state.changes_at) == (is_open, changes_at.replace(tzinfo=UTC))


def test_a_window_in_a_dst_zone_follows_local_wall_clock_on_both_sides_of_the_change() -> None:
    window = m.Window("0 9 * * *", "0 17 * * *", tz="Europe/Berlin")
    before = windows.window_state(window, datetime(2026, 3, 28, 7, 30, tzinfo=UTC))  # 08:30 CET
    after = windows.window_state(window, datetime(2026, 3, 30, 7, 30, tzinfo=UTC))  # 09:30 CEST
    assert (before.open, before.changes_at) == (False, datetime(2026, 3, 28, 8, 0, tzinfo=UTC))
    assert (after.open, after.changes_at) == (True, datetime(2026, 3, 30, 15, 0, tzinfo=UTC))


def test_a_window_opening_inside_the_spring_forward_gap_opens_right_after_the_gap() -> None:
    window = m.Window("30 2 * * *", "0 4 * * *", tz="Europe/Berlin")
    state = windows.window_state(window, datetime(2026, 3, 28, 23, 0, tzinfo=UTC))
    assert state.changes_at == datetime(2026, 3, 29, 1, 0, tzinfo=UTC)  # 03:00 CEST


def test_an_invalid_window_keeps_the_gate_closed_with_a_message() -> None:
    state = windows.window_state(m.Window("61 * * * *", "0 * * * *"), T0)
    assert not state.open
    assert "invalid cron" in state.error
    assert (
        "unknown time zone" in windows.window_state(m.Window("0 * * * *", "1 * * * *", "Mars/Base"), T0).error
    )


def test_the_simulator_lays_out_batches_gates_and_earliest_times() -> None:
    s = spec(
        stage("dev", max_in_flight=m.MaxInFlight(2), after=(m.Delay(minutes(10)),)),
        stage("prod", after=(m.Approval("prod-ok"),)),
    )
    approved = T0 + minutes(60)
    tl = timeline.simulate(
        s, fleet(dev=3, prod=2), T0, timeline.Assumptions(minutes(2), {"prod-ok": approved})
    )
    dev, prod = tl.stages
    assert [b.clusters for b in dev.batches] == [("dev-0", "dev-1"), ("dev-2",)]
    assert [(b.start, b.end) for b in dev.batches] == [
        (T0, T0 + minutes(2)),
        (T0 + minutes(2), T0 + minutes(4)),
    ]
    assert dev.succeeded_at == T0 + minutes(14)
    assert prod.started_at == T0 + minutes(14)
    assert prod.delivered_at == T0 + minutes(16)
    assert prod.waits[0].description == "after-gates: waiting for approval prod-ok"
    assert (prod.waits[0].since, prod.waits[0].until) == (T0 + minutes(16), approved)
    assert (tl.outcome, tl.finished_at) == ("Succeeded", approved)


def test_the_simulator_reports_a_pending_approval_as_blocked() -> None:
    s = spec(stage("dev", after=(m.Approval("dev-ok"),)), stage("prod"))
    tl = timeline.simulate(s, fleet(dev=1, prod=1), T0, timeline.Assumptions())
    assert tl.outcome == "Blocked"
    assert tl.finished_at is None
    assert tl.message == "stage dev: after-gates: waiting for approval dev-ok"
    assert tl.stages[1].started_at is None


def test_the_simulator_shows_a_failing_cluster_failing_the_rollout_at_the_deadline() -> None:
    s = spec(stage("dev"), progress_deadline=timedelta(minutes=30))
    tl = timeline.simulate(s, fleet(dev=2), T0, timeline.Assumptions(failing_clusters=frozenset({"dev-1"})))
    # dev-0 finishing at +2 min is the last progress, so the 30 min deadline expires at +32
    assert tl.outcome == "Failed"
    assert tl.finished_at == T0 + minutes(32)

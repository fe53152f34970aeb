"""Evictions and disruption budgets, decided (ADR 0107): which evictions are invalid and why, which
a budget refuses (counting the placement's available and unavailable clusters as KubeFleet does),
that a verdict is final, and that an executed eviction keeps its cluster out of its placement's picks
so that a PickN placement picks another cluster."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from fleetwave.api.evictions import PlacementDisruptionBudgetSpec
from fleetwave.api.kubefleet import ClusterResourcePlacement, PlacementSpec, ResourcePlacement
from fleetwave.controllers.kubefleet import eviction as eviction_controller
from fleetwave.controllers.kubefleet import evictions as ev
from fleetwave.controllers.kubefleet import history, parsed
from fleetwave.controllers.shared.context import Cache, Context
from fleetwave.controllers.shared.status_writer import Whose

SELECTED = [{"group": "", "version": "v1", "kind": "Namespace", "name": "app"}]
AT = "2030-01-01T00:00:00Z"


def _spec(policy: dict[str, Any] | None = None, **spec: Any) -> PlacementSpec:
    body: dict[str, Any] = {"resourceSelectors": SELECTED, **spec}
    if policy is not None:
        body["policy"] = policy
    return PlacementSpec.model_validate(body)


PICK_3 = {"placementType": "PickN", "numberOfClusters": 3}
PICK_2 = {"placementType": "PickN", "numberOfClusters": 2}


def _budget(**fields: Any) -> PlacementDisruptionBudgetSpec:
    return PlacementDisruptionBudgetSpec.model_validate(fields)


def _held(done: dict[str, bool]) -> dict[str, history.Held]:
    return {c: history.Held(c, "0", AT, ok) for c, ok in done.items()}


def _facts(
    spec: PlacementSpec | None = None,
    *,
    target: str = "ns/a",
    picked: tuple[str, ...] = ("ns/a", "ns/b", "ns/c"),
    done: dict[str, bool] | None = None,
    **more: Any,
) -> ev.Facts:
    held = _held(done if done is not None else dict.fromkeys(picked, True))
    return ev.Facts(
        "web",
        spec if spec is not None else _spec(PICK_3),
        clusters=(target,),
        picked=frozenset(picked),
        held=held,
        **more,
    )


def test_an_eviction_that_cannot_apply_is_invalid_with_the_reason() -> None:
    cases = [
        (ev.Facts("web", None, clusters=("ns/a",)), ev.MISSING_PLACEMENT),
        (_facts(deleting=True), ev.DELETING_PLACEMENT),
        (_facts(_spec({"placementType": "PickFixed", "clusterNames": ["a"]})), ev.PICK_FIXED),
        (_facts(target="ns/z"), ev.NOT_PICKED),  # neither picked nor holding the content
        (ev.Facts("web", _spec(PICK_3), picked=frozenset({"ns/a"})), ev.NOT_PICKED),  # no such member
    ]
    for facts, message in cases:
        verdict = ev.decide(facts)
        assert (verdict.valid, verdict.executed, verdict.message) == (False, None, message)
    external = ev.decide(_facts(_spec(PICK_3, strategy={"type": "External"})))
    assert not external.valid
    assert "strategy External" in external.message
    assert "web" in external.message
    twice = ev.decide(ev.Facts("web", _spec(PICK_3), clusters=("x/a", "y/a"), picked=frozenset({"x/a"})))
    assert not twice.valid
    assert "x/a, y/a" in twice.message
    assert "namespace/name" in twice.message


def test_without_a_budget_an_eviction_of_a_cluster_holding_the_content_is_executed() -> None:
    for policy in (None, {"placementType": "PickAll"}, PICK_3):
        verdict = ev.decide(_facts(_spec(policy)))
        assert (verdict.valid, verdict.executed, verdict.message) == (True, True, ev.NO_BUDGET)
        assert verdict.withdraws


def test_a_cluster_picked_but_not_reached_yet_is_refused_and_one_leaving_is_executed() -> None:
    nothing_yet = ev.decide(_facts(done={"ns/b": True, "ns/c": True}))
    assert (nothing_yet.valid, nothing_yet.executed, nothing_yet.message) == (True, False, ev.NOTHING_PLACED)
    leaving = ev.decide(_facts(picked=("ns/b", "ns/c"), done={"ns/a": True, "ns/b": True, "ns/c": True}))
    assert (leaving.valid, leaving.executed, leaving.message) == (True, True, ev.BEING_REMOVED)


def test_a_failed_cluster_or_a_report_diff_placement_is_evicted_whatever_the_budget() -> None:
    strict = _budget(maxUnavailable=0)
    failed = ev.decide(_facts(failed=frozenset({"ns/a"}), budget=strict))
    assert (failed.executed, failed.message) == (True, ev.FAILED_THERE)
    diff = _spec(PICK_3, strategy={"applyStrategy": {"type": "ReportDiff"}})
    assert ev.decide(_facts(diff, budget=strict)).message == ev.FAILED_THERE
    # A failure elsewhere does not open the budget for a healthy cluster: it counts as unavailable.
    elsewhere = ev.decide(_facts(failed=frozenset({"ns/b"}), budget=_budget(maxUnavailable=1)))
    assert (elsewhere.executed, elsewhere.message) == (
        False,
        ev.BLOCKED_BY_BUDGET.format(available=2, total=3),
    )


def test_min_available_refuses_an_eviction_that_would_leave_too_few_available() -> None:
    blocked = ev.decide(_facts(budget=_budget(minAvailable=3)))
    assert (blocked.valid, blocked.executed) == (True, False)
    assert blocked.message == (
        "Eviction is blocked by specified ClusterResourcePlacementDisruptionBudget, "
        "availablePlacements: 3, totalPlacements: 3"
    )
    allowed = ev.decide(_facts(budget=_budget(minAvailable=2)))
    assert (allowed.executed, allowed.message) == (True, ev.ALLOWED_BY_BUDGET.format(available=3, total=3))
    # A cluster still rolling out is not available: 2 available, minAvailable 2 leaves no room.
    rolling = ev.decide(
        _facts(done={"ns/a": True, "ns/b": True, "ns/c": False}, budget=_budget(minAvailable=2))
    )
    assert (rolling.executed, rolling.message) == (False, ev.BLOCKED_BY_BUDGET.format(available=2, total=3))


def test_max_unavailable_counts_the_clusters_already_unavailable() -> None:
    healthy = ev.decide(_facts(budget=_budget(maxUnavailable=1)))
    assert healthy.executed
    one_down = ev.decide(
        _facts(done={"ns/a": True, "ns/b": True, "ns/c": False}, budget=_budget(maxUnavailable=1))
    )
    assert not one_down.executed
    assert ev.decide(_facts(budget=_budget(maxUnavailable=0))).executed is False


def test_percentages_are_of_number_of_clusters_rounded_up() -> None:
    assert ev.scaled("34%", 3) == 2  # 1.02 rounds up
    assert ev.scaled("100%", 3) == 3
    assert ev.scaled("0%", 3) == 0
    assert ev.scaled(2, 10) == 2
    # PickN of 3: minAvailable 50% is 2 (1.5 up), so with 3 available one may go.
    assert ev.decide(_facts(budget=_budget(minAvailable="50%"))).executed
    # 67% of 3 is 3 (2.01 up): none may go.
    assert not ev.decide(_facts(budget=_budget(minAvailable="67%"))).executed
    # maxUnavailable 10% of 3 rounds up to 1.
    assert ev.decide(_facts(budget=_budget(maxUnavailable="10%"))).executed
    allowed = ev.disruptions_allowed(_budget(maxUnavailable="40%"), wanted=5, total=5, available=4)
    assert allowed == 1  # 2 unavailable allowed, 1 already is


def test_a_pickall_placement_takes_only_an_integer_min_available() -> None:
    pick_all = _spec({"placementType": "PickAll"})
    for budget in (_budget(maxUnavailable=1), _budget(minAvailable="50%")):
        verdict = ev.decide(_facts(pick_all, budget=budget))
        assert (verdict.valid, verdict.executed, verdict.message) == (True, False, ev.MISCONFIGURED)
    assert ev.decide(_facts(pick_all, budget=_budget(minAvailable=2))).executed
    assert not ev.decide(_facts(pick_all, budget=_budget(minAvailable=3))).executed


def test_a_budget_that_cannot_be_read_refuses_the_eviction() -> None:
    verdict = ev.decide(_facts(budget_problem="Eviction is blocked: budget web: broken"))
    assert (verdict.valid, verdict.executed, verdict.message) == (
        True,
        False,
        "Eviction is blocked: budget web: broken",
    )


def test_a_budget_sets_exactly_one_count_or_percentage() -> None:
    for wrong in ({}, {"maxUnavailable": 1, "minAvailable": 1}):
        with pytest.raises(ValidationError, match="exactly one of maxUnavailable and minAvailable"):
            _budget(**wrong)
    for bad in ("101%", "5", "-1%", -1):
        with pytest.raises(ValidationError):
            _budget(minAvailable=bad)
    assert _budget(maxUnavailable="25%").max_unavailable == "25%"


def test_conditions_say_valid_and_executed_with_upstream_reasons_and_a_verdict_is_final() -> None:
    refused = ev.conditions(ev.Verdict(True, False, "blocked"), {}, 2, AT)
    assert [(c["type"], c["status"], c["reason"], c["observedGeneration"]) for c in refused] == [
        ("Valid", "True", "ClusterResourcePlacementEvictionValid", 2),
        ("Executed", "False", "ClusterResourcePlacementEvictionNotExecuted", 2),
    ]
    assert refused[0]["message"] == "Eviction is valid"
    invalid = ev.conditions(ev.Verdict(False, None, ev.PICK_FIXED), {}, 1, AT)
    assert [(c["type"], c["status"], c["reason"]) for c in invalid] == [
        ("Valid", "False", "ClusterResourcePlacementEvictionInvalid")
    ]
    done = ev.conditions(ev.Verdict(True, True, ev.NO_BUDGET), {}, 1, AT)
    assert done[1]["reason"] == "ClusterResourcePlacementEvictionExecuted"
    for status in ({"conditions": refused}, {"conditions": invalid}, {"conditions": done}):
        assert ev.terminal(status)
    assert not ev.terminal({})
    assert not ev.terminal(None)
    assert ev.executed({"conditions": done})
    assert not ev.executed({"conditions": refused})


def test_only_executed_evictions_name_clusters_to_leave_out() -> None:
    def eviction(placement: str, cluster: str, verdict: ev.Verdict | None) -> dict[str, Any]:
        status = {"conditions": ev.conditions(verdict, {}, 1, AT)} if verdict else {}
        return {"spec": {"placementName": placement, "clusterName": cluster}, "status": status}

    objs = [
        eviction("web", "a", ev.Verdict(True, True, ev.NO_BUDGET)),
        eviction("web", "b", ev.Verdict(True, False, "blocked")),
        eviction("web", "c", None),  # not decided yet
        eviction("db", "c", ev.Verdict(True, True, ev.NO_BUDGET)),
        {"spec": "hostile"},
    ]
    assert ev.evicted(objs) == {"web": frozenset({"a"}), "db": frozenset({"c"})}
    keys = ["x/a", "y/a", "x/c", "x/d"]
    assert ev.left_out({"c", "y/a", "a"}, keys) == {"x/c", "y/a"}  # "a" alone names two: none
    assert ev.named("x/d", keys) == ("x/d",)
    assert ev.named("a", keys) == ("x/a", "y/a")


def test_failed_clusters_are_those_whose_newest_delivery_carries_an_error() -> None:
    status = {"deliveries": {"ns/a": {"index": "0", "error": "boom"}, "ns/b": {"index": "0"}, "ns/c": 3}}
    assert ev.failed_clusters(status) == {"ns/a"}
    assert ev.failed_clusters({"deliveries": "hostile"}) == frozenset()


class _Informer:
    def __init__(self, objs: list[dict[str, Any]]) -> None:
        self.store = {str(i): o for i, o in enumerate(objs)}


def _member(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "fleet"}, "status": {"ready": True}}


def _ctx(evictions: list[dict[str, Any]]) -> Context:
    cache = Cache(
        {
            "MemberCluster": _Informer([_member(n) for n in ("member-1", "member-2", "member-3")]),
            ev.EVICTION: _Informer(evictions),
        }  # type: ignore[dict-item]
    )
    return Context(
        client=None,  # type: ignore[arg-type]
        cache=cache,
        recorder=None,  # type: ignore[arg-type]
        helm=None,  # type: ignore[arg-type]
        health=None,  # type: ignore[arg-type]
        namespace="fleet",
        clock=lambda: None,  # type: ignore[arg-type,return-value]
    )


def test_pickn_leaves_out_a_cluster_while_its_executed_eviction_exists_and_picks_another() -> None:
    executed = {"conditions": ev.conditions(ev.Verdict(True, True, ev.NO_BUDGET), {}, 1, AT)}
    refused = {"conditions": ev.conditions(ev.Verdict(True, False, "blocked"), {}, 1, AT)}

    def eviction(cluster: str, status: dict[str, Any]) -> dict[str, Any]:
        return {
            "metadata": {"name": cluster},
            "spec": {"placementName": "web", "clusterName": cluster},
            "status": status,
        }

    body = {"metadata": {"name": "web"}, "spec": {"resourceSelectors": SELECTED, "policy": PICK_2}}
    placement = ClusterResourcePlacement.model_validate(body)
    before, _ = parsed.fleet_of(_ctx([]), placement)
    assert sorted(before.names) == ["fleet/member-1", "fleet/member-2"]
    # A refused eviction changes nothing; an executed one moves the pick to member-3.
    assert sorted(parsed.fleet_of(_ctx([eviction("member-1", refused)]), placement)[0].names) == [
        "fleet/member-1",
        "fleet/member-2",
    ]
    after, _ = parsed.fleet_of(_ctx([eviction("member-1", executed)]), placement)
    assert sorted(after.names) == ["fleet/member-2", "fleet/member-3"]
    # PickAll leaves it out too; another placement's eviction, or a ResourcePlacement, does not.
    pick_all = ClusterResourcePlacement.model_validate({**body, "spec": {"resourceSelectors": SELECTED}})
    assert "fleet/member-1" not in parsed.fleet_of(_ctx([eviction("member-1", executed)]), pick_all)[0].names
    other = ClusterResourcePlacement.model_validate({**body, "metadata": {"name": "db"}})
    assert "fleet/member-1" in parsed.fleet_of(_ctx([eviction("member-1", executed)]), other)[0].names
    namespaced = ResourcePlacement.model_validate({**body, "metadata": {"name": "web", "namespace": "n"}})
    assert "fleet/member-1" in parsed.fleet_of(_ctx([eviction("member-1", executed)]), namespaced)[0].names


def test_a_placements_evictions_wait_while_the_cache_lags_a_verdict_written_on_any_of_them() -> None:
    def eviction(name: str, placement: str, version: str) -> dict[str, Any]:
        spec = {"placementName": placement, "clusterName": "member-1"}
        return {"metadata": {"name": name, "resourceVersion": version}, "spec": spec}

    def lagging(objs: list[dict[str, Any]], placement: str) -> bool:
        ctx = _ctx(objs)
        ctx.statuses.own.record(Whose.of(ev.EVICTION, None, "first"), "7")  # our verdict on `first`
        return eviction_controller._behind_own_verdicts(ctx, placement)

    # The cache still shows `first` before the verdict: `second` (and `first` itself) wait.
    assert lagging([eviction("first", "web", "6"), eviction("second", "web", "9")], "web")
    # Once the cache shows it (or anything newer), they go on; another placement never waited.
    assert not lagging([eviction("first", "web", "7"), eviction("second", "web", "9")], "web")
    assert not lagging([eviction("first", "web", "8")], "web")
    assert not lagging([eviction("first", "web", "6"), eviction("other", "db", "2")], "db")

"""Which members a placement picks: taints keep PickAll and PickN off a cluster unless tolerated;
property selectors filter, preferred terms rank and topology spread constraints spread PickN."""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

from fleetwave.api.kubefleet import PlacementPolicy
from fleetwave.controllers.fleet import members
from fleetwave.controllers.kubefleet import picking


def member(name: str, *taints: dict[str, Any], ready: bool = True) -> members.Member:
    return members.from_object(
        {
            "metadata": {"name": name, "namespace": "fleet", "labels": {"env": "prod"}},
            "spec": {"taints": list(taints)},
            "status": {"ready": ready},
        }
    )


FLEET = [
    member("a"),
    member("b", {"key": "gpu", "value": "true", "effect": "NoSchedule"}),
    member("c", {"key": "maintenance"}),  # effect defaults to NoSchedule, as the CRD defaults it
]


def names(picked: list[members.Member]) -> list[str]:
    return [m.name for m in picked]


def policy(**fields: Any) -> PlacementPolicy:
    return PlacementPolicy.model_validate(fields)


def test_untolerated_taints_keep_pickall_off_a_cluster() -> None:
    assert names(picking.pick(None, FLEET)) == ["a"]
    assert names(picking.pick(policy(placementType="PickAll"), FLEET)) == ["a"]


def test_equal_needs_key_and_value_exists_needs_the_key_and_an_empty_key_tolerates_all() -> None:
    gpu = policy(placementType="PickAll", tolerations=[{"key": "gpu", "value": "true"}])
    assert names(picking.pick(gpu, FLEET)) == ["a", "b"]
    wrong_value = policy(placementType="PickAll", tolerations=[{"key": "gpu", "value": "no"}])
    assert names(picking.pick(wrong_value, FLEET)) == ["a"]
    exists = policy(placementType="PickAll", tolerations=[{"key": "maintenance", "operator": "Exists"}])
    assert names(picking.pick(exists, FLEET)) == ["a", "c"]
    everything = policy(placementType="PickAll", tolerations=[{"operator": "Exists"}])
    assert names(picking.pick(everything, FLEET)) == ["a", "b", "c"]
    effect = policy(placementType="PickAll", tolerations=[{"operator": "Exists", "effect": "NoSchedule"}])
    assert names(picking.pick(effect, FLEET)) == ["a", "b", "c"]


def test_pickn_counts_only_tolerated_clusters_and_pickfixed_ignores_taints() -> None:
    two = policy(placementType="PickN", numberOfClusters=2)
    assert names(picking.pick(two, FLEET)) == ["a"]
    fixed = policy(placementType="PickFixed", clusterNames=["b", "c"])
    assert names(picking.pick(fixed, FLEET)) == ["b", "c"]


# ---- properties, preferences and topology spread (ADR 0085) ---------------------------------------

NODES = members.NODE_COUNT


def cluster(
    name: str,
    labels: dict[str, str] | None = None,
    *,
    ready: bool = True,
    version: str | None = None,
    props: dict[str, str] | None = None,
    **properties: str,
) -> members.Member:
    """A member; `props` and keyword arguments are `status.properties` (`nodes`: the node count)."""
    named = {NODES if k == "nodes" else k: v for k, v in {**(props or {}), **properties}.items()}
    status: dict[str, Any] = {
        "ready": ready,
        "properties": {k: {"value": v, "observationTime": "2024-04-30T14:54:24Z"} for k, v in named.items()},
    }
    if version:
        status["version"] = version
    return members.from_object(
        {"metadata": {"name": name, "namespace": "fleet", "labels": labels or {}}, "status": status}
    )


def required(*terms: dict[str, Any], **fields: Any) -> PlacementPolicy:
    affinity = {
        "clusterAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"clusterSelectorTerms": terms}}
    }
    return policy(affinity=affinity, **({"placementType": "PickAll"} | fields))


def preferred(n: int, *terms: dict[str, Any], **fields: Any) -> PlacementPolicy:
    affinity = {"clusterAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": list(terms)}}
    return policy(placementType="PickN", numberOfClusters=n, affinity=affinity, **fields)


def expression(name: str, operator: str, value: str) -> dict[str, Any]:
    return {
        "propertySelector": {"matchExpressions": [{"name": name, "operator": operator, "values": [value]}]}
    }


def sorter(name: str, order: str) -> dict[str, Any]:
    return {"propertySorter": {"name": name, "sortOrder": order}}


def test_properties_are_read_from_status_properties_the_version_and_numeric_labels() -> None:
    mb = members.from_object(
        {
            "metadata": {"name": "a", "labels": {"gpus": "4", "env": "prod", NODES: "9"}},
            "status": {"version": "v1.30.2", "properties": {NODES: {"value": "3"}, "cost": {"value": 0.5}}},
        }
    )
    # a label that is not a number is no property; an observed property wins over a label
    assert mb.properties == {"gpus": "4", NODES: "3", members.K8S_VERSION: "v1.30.2", "cost": "0.5"}
    assert members.from_object({"metadata": {"name": "b"}}).properties == {}


@pytest.mark.parametrize(
    ("operator", "value", "picked"),
    [
        ("Gt", "5", ["c"]),
        ("Ge", "5", ["b", "c"]),
        ("Eq", "5", ["b"]),
        ("Eq", "5.0", ["b"]),  # numbers, not strings
        ("Ne", "5", ["a", "c"]),  # d has no node count, e a value that is no number: neither matches
        ("Lt", "5", ["a"]),
        ("Le", "1e1", ["a", "b", "c"]),
    ],
)
def test_a_property_selector_compares_numbers_and_a_cluster_without_the_value_never_matches(
    operator: str, value: str, picked: list[str]
) -> None:
    fleet = [
        cluster("a", nodes="3"),
        cluster("b", nodes="5"),
        cluster("c", nodes="10"),
        cluster("d"),
        cluster("e", nodes="x"),
    ]
    assert names(picking.pick(required(expression(NODES, operator, value)), fleet)) == picked


def test_label_and_property_selectors_of_a_term_are_anded_and_terms_are_ored() -> None:
    fleet = [
        cluster("a", {"env": "prod"}, nodes="3"),
        cluster("b", {"env": "prod"}, nodes="8"),
        cluster("c", {"env": "dev"}, nodes="8"),
        cluster("d", {"env": "dev", "gpus": "2"}),
    ]
    big_prod = {"labelSelector": {"matchLabels": {"env": "prod"}}, **expression(NODES, "Ge", "5")}
    assert names(picking.pick(required(big_prod), fleet)) == ["b"]
    assert names(picking.pick(required(big_prod, expression("gpus", "Gt", "1")), fleet)) == ["b", "d"]
    assert names(picking.pick(required(big_prod, placementType="PickN", numberOfClusters=5), fleet)) == ["b"]


def test_the_kubernetes_version_compares_at_the_precision_written() -> None:
    fleet = [
        cluster("old", version="v1.9.11"),
        cluster("prev", version="v1.29.4-eks-036c24b"),
        cluster("cur", version="v1.30.2"),
        cluster("next", version="v1.31.0+k3s1"),
        cluster("none"),
    ]
    version = members.K8S_VERSION
    assert names(picking.pick(required(expression(version, "Ge", "1.30")), fleet)) == ["cur", "next"]
    assert names(picking.pick(required(expression(version, "Eq", "1.30")), fleet)) == ["cur"]
    assert names(picking.pick(required(expression(version, "Lt", "1.30")), fleet)) == ["old", "prev"]
    assert names(picking.pick(required(expression(version, "Eq", "1")), fleet)) == [
        "cur",
        "next",
        "old",
        "prev",
    ]


def test_pickn_takes_the_top_n_by_the_weights_of_matching_preferred_terms_then_by_name() -> None:
    fleet = [
        cluster("a", {"tier": "gold"}),
        cluster("b", {"tier": "gold", "spot": "true"}),
        cluster("c", {"tier": "silver"}, nodes="9"),
        cluster("d", {"tier": "silver"}, nodes="2"),
        cluster("e"),
    ]
    gold = {"weight": 50, "preference": {"labelSelector": {"matchLabels": {"tier": "gold"}}}}
    no_spot = {"weight": -60, "preference": {"labelSelector": {"matchLabels": {"spot": "true"}}}}
    # label AND property selector in a preferred term (KubeFleet only allows the label selector there)
    big_silver = {
        "weight": 30,
        "preference": {"labelSelector": {"matchLabels": {"tier": "silver"}}, **expression(NODES, "Ge", "5")},
    }
    three = preferred(3, gold, no_spot, big_silver)
    assert picking.preference_scores(three, fleet) == {
        "fleet/a": 50,
        "fleet/b": -10,
        "fleet/c": 30,
        "fleet/d": 0,
        "fleet/e": 0,
    }
    assert names(picking.pick(three, fleet)) == ["a", "c", "d"]  # d and e tie at 0: by name
    assert names(picking.pick(preferred(0, gold), fleet)) == []


def test_required_affinity_tolerations_and_readiness_filter_before_preferences() -> None:
    fleet = [
        cluster("best-but-down", {"tier": "gold", "env": "prod"}, ready=False),
        members.from_object(
            {
                "metadata": {
                    "name": "best-but-tainted",
                    "namespace": "fleet",
                    "labels": {"tier": "gold", "env": "prod"},
                },
                "spec": {"taints": [{"key": "gpu"}]},
                "status": {"ready": True},
            }
        ),
        cluster("best-but-dev", {"tier": "gold", "env": "dev"}),
        cluster("plain", {"env": "prod"}),
    ]
    gold = {"weight": 100, "preference": {"labelSelector": {"matchLabels": {"tier": "gold"}}}}
    only_prod = {
        "clusterAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "clusterSelectorTerms": [{"labelSelector": {"matchLabels": {"env": "prod"}}}]
            },
            "preferredDuringSchedulingIgnoredDuringExecution": [gold],
        }
    }
    assert names(
        picking.pick(policy(placementType="PickN", numberOfClusters=3, affinity=only_prod), fleet)
    ) == ["plain"]


def test_a_property_sorter_scales_its_weight_between_the_lowest_and_highest_eligible_values() -> None:
    cpu = "example.com/free-cpu"
    fleet = [
        cluster("bravelion", props={cpu: "100"}),
        cluster("smartfish", props={cpu: "20"}),
        cluster("jumpingcat", props={cpu: "10"}),
        cluster("unknown"),  # no value: nothing from the term
        cluster("down", ready=False, props={cpu: "1000"}),  # not eligible: not among the bounds
    ]

    def scores(weight: int, order: str) -> dict[str, int]:
        found = picking.preference_scores(
            preferred(3, {"weight": weight, "preference": sorter(cpu, order)}), fleet[:4]
        )
        return {k.removeprefix("fleet/"): v for k, v in found.items()}

    # KubeFleet's documented examples: (20 - 10) / (100 - 10) * 100 = 11.1 -> 11, and 1 - that -> 89
    assert scores(100, "Descending") == {"bravelion": 100, "smartfish": 11, "jumpingcat": 0, "unknown": 0}
    assert scores(100, "Ascending") == {"bravelion": 0, "smartfish": 89, "jumpingcat": 100, "unknown": 0}
    assert scores(-50, "Descending") == {"bravelion": -50, "smartfish": -6, "jumpingcat": 0, "unknown": 0}
    assert names(
        picking.pick(preferred(2, {"weight": 100, "preference": sorter(cpu, "Ascending")}), fleet)
    ) == [
        "jumpingcat",
        "smartfish",
    ]


def test_a_sorter_rounds_half_away_from_zero_and_gives_nothing_when_all_values_are_equal() -> None:
    fleet = [cluster("a", n="0"), cluster("b", n="1"), cluster("c", n="2")]
    for weight, middle in ((1, 1), (-1, -1), (3, 2), (-3, -2)):
        found = picking.preference_scores(
            preferred(1, {"weight": weight, "preference": sorter("n", "Descending")}), fleet
        )
        assert found["fleet/b"] == middle
    same = [cluster("a", n="4"), cluster("b", n="4")]
    assert picking.preference_scores(
        preferred(1, {"weight": 9, "preference": sorter("n", "Descending")}), same
    ) == {
        "fleet/a": 0,
        "fleet/b": 0,
    }


def spread(
    n: int, *constraints: dict[str, Any], prefer: list[dict[str, Any]] | None = None
) -> PlacementPolicy:
    fields: dict[str, Any] = {
        "placementType": "PickN",
        "numberOfClusters": n,
        "topologySpreadConstraints": list(constraints),
    }
    if prefer:
        fields["affinity"] = {"clusterAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": prefer}}
    return policy(**fields)


def zone(name: str, value: str | None, ready: bool = True, **labels: str) -> members.Member:
    return cluster(name, {**labels, **({"zone": value} if value else {})}, ready=ready)


def test_do_not_schedule_never_lets_the_skew_pass_max_skew_even_if_fewer_clusters_are_picked() -> None:
    # KubeFleet's how-to fleet: one from each region (its tie-break by name is the reverse of ours)
    fleet = [
        zone("bravelion", "east"),
        zone("smartfish", "east"),
        zone("jumpingcat", "west"),
        zone("flyingpenguin", "west"),
    ]
    assert names(picking.pick(spread(2, {"topologyKey": "zone"}), fleet)) == ["bravelion", "flyingpenguin"]
    lopsided = [zone("e1", "east"), zone("e2", "east"), zone("e3", "east"), zone("w1", "west")]
    assert names(picking.pick(spread(4, {"topologyKey": "zone", "maxSkew": 1}), lopsided)) == [
        "e1",
        "w1",
        "e2",
    ]
    assert len(picking.pick(spread(4, {"topologyKey": "zone", "maxSkew": 2}), lopsided)) == 4


def test_a_cluster_without_the_topology_key_is_in_no_domain_and_may_still_be_picked() -> None:
    fleet = [zone("e1", "east"), zone("e2", "east"), zone("w1", "west"), zone("nowhere", None)]
    # it keeps the skew (0) where any other first choice raises it (-1), so it comes first
    assert names(picking.pick(spread(4, {"topologyKey": "zone"}), fleet)) == ["nowhere", "e1", "w1", "e2"]
    # a domain whose only cluster is not eligible holds nobody back (KubeFleet counts it, at 0)
    fleet = [zone("e1", "east"), zone("e2", "east"), zone("w1", "west", ready=False)]
    assert names(picking.pick(spread(2, {"topologyKey": "zone"}), fleet)) == ["e1", "e2"]


def test_schedule_anyway_prefers_the_least_skewed_choice_but_still_picks_n() -> None:
    fleet = [zone("e1", "east"), zone("e2", "east"), zone("e3", "east"), zone("w1", "west")]
    anyway = {"topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}
    assert names(picking.pick(spread(4, anyway), fleet)) == ["e1", "w1", "e2", "e3"]


def test_the_spread_outranks_preferences_and_preferences_rank_within_it() -> None:
    fleet = [
        zone("e1", "east", tier="gold"),
        zone("e2", "east", tier="gold"),
        zone("w1", "west"),
        zone("w2", "west", tier="gold"),
    ]
    gold = [{"weight": 100, "preference": {"labelSelector": {"matchLabels": {"tier": "gold"}}}}]
    for how in ("DoNotSchedule", "ScheduleAnyway"):
        constraint = {"topologyKey": "zone", "whenUnsatisfiable": how}
        assert names(picking.pick(spread(2, constraint, prefer=gold), fleet)) == ["e1", "w2"]
    assert names(picking.pick(preferred(2, *gold), fleet)) == ["e1", "e2"]


def test_every_do_not_schedule_constraint_holds_and_schedule_anyway_ones_add_up() -> None:
    fleet = [
        cluster("a", {"zone": "z1", "rack": "r1"}),
        cluster("b", {"zone": "z1", "rack": "r2"}),
        cluster("c", {"zone": "z2", "rack": "r1"}),
        cluster("d", {"zone": "z2", "rack": "r2"}),
    ]
    both = spread(2, {"topologyKey": "zone"}, {"topologyKey": "rack"})
    assert names(picking.pick(both, fleet)) == ["a", "d"]
    soft_rack = spread(
        2, {"topologyKey": "zone"}, {"topologyKey": "rack", "whenUnsatisfiable": "ScheduleAnyway"}
    )
    assert names(picking.pick(soft_rack, fleet)) == ["a", "d"]


# ---- the invariants, on random fleets ----------------------------------------------------------------

ZONES = ("a", "b", "c")


@hs.composite
def fleets(draw: hs.DrawFn) -> list[members.Member]:
    rows = draw(
        hs.lists(
            hs.tuples(
                hs.sampled_from((*ZONES, None)),
                hs.sampled_from(("prod", "dev")),
                hs.sampled_from(("r1", "r2")),
                hs.booleans(),
                hs.one_of(hs.none(), hs.integers(0, 40).map(str)),
            ),
            max_size=8,
        )
    )
    return [
        cluster(
            f"c{i}",
            {"env": env, "rack": rack, **({"zone": z} if z else {})},
            ready=ready,
            props={NODES: n} if n else None,
        )
        for i, (z, env, rack, ready, n) in enumerate(rows)
    ]


@hs.composite
def pick_n_policies(draw: hs.DrawFn) -> tuple[PlacementPolicy, bool]:
    """A PickN policy with a DoNotSchedule zone constraint, and whether it requires env=prod."""
    prefer = [
        {
            "weight": w,
            "preference": sorter(NODES, kind)
            if kind != "label"
            else {"labelSelector": {"matchLabels": {"rack": "r1"}}},
        }
        for w, kind in draw(
            hs.lists(
                hs.tuples(hs.integers(-100, 100), hs.sampled_from(("label", "Ascending", "Descending"))),
                max_size=3,
            )
        )
    ]
    affinity: dict[str, Any] = {"preferredDuringSchedulingIgnoredDuringExecution": prefer}
    only_prod = draw(hs.booleans())
    if only_prod:
        affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
            "clusterSelectorTerms": [{"labelSelector": {"matchLabels": {"env": "prod"}}}]
        }
    constraints = [
        {"topologyKey": "zone", "maxSkew": draw(hs.integers(1, 3)), "whenUnsatisfiable": "DoNotSchedule"}
    ]
    if draw(hs.booleans()):
        constraints.append({"topologyKey": "rack", "whenUnsatisfiable": "ScheduleAnyway"})
    chosen = policy(
        placementType="PickN",
        numberOfClusters=draw(hs.integers(0, 9)),
        affinity={"clusterAffinity": affinity},
        topologySpreadConstraints=constraints,
    )
    return chosen, only_prod


def zone_skew(eligible: list[members.Member], chosen: Iterable[members.Member]) -> int:
    count = {mb.labels["zone"]: 0 for mb in eligible if "zone" in mb.labels}
    for mb in chosen:
        if "zone" in mb.labels:
            count[mb.labels["zone"]] += 1
    return max(count.values()) - min(count.values()) if count else 0


@settings(max_examples=300, deadline=None)
@given(fleets(), pick_n_policies())
def test_pickn_picks_only_eligible_clusters_at_most_n_within_max_skew_and_as_many_as_can_be(
    fleet: list[members.Member], drawn: tuple[PlacementPolicy, bool]
) -> None:
    chosen_policy, only_prod = drawn
    wanted = chosen_policy.number_of_clusters or 0
    (zone_rule, *_) = chosen_policy.topology_spread_constraints or []
    eligible = [mb for mb in fleet if mb.ready and (not only_prod or mb.labels["env"] == "prod")]
    picked = picking.pick(chosen_policy, fleet)
    assert len({mb.key for mb in picked}) == len(picked) <= wanted
    assert {mb.key for mb in picked} <= {mb.key for mb in eligible}
    assert zone_skew(eligible, picked) <= zone_rule.max_skew
    # as many as any set within maxSkew holds (every subset, by brute force)
    best = max(
        len(subset)
        for size in range(len(eligible) + 1)
        for subset in itertools.combinations(eligible, size)
        if zone_skew(eligible, subset) <= zone_rule.max_skew
    )
    assert len(picked) == min(wanted, best)
    assert picking.pick(chosen_policy, reversed(fleet)) == picked  # the order members come in is no input

"""A cluster set's choice (ADR 0108): up to maxReplicas ready matching clusters, the ones already
chosen kept while they stay usable, the rest filled in key order."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as hs

from fleetwave.core.cluster_sets import replaced, select

KEYS = [f"{ns}/c{i}" for ns in ("dev", "prod") for i in range(5)]
matching_st = hs.dictionaries(hs.sampled_from(KEYS), hs.booleans(), max_size=len(KEYS))
current_st = hs.lists(hs.sampled_from(KEYS), max_size=6)
replicas_st = hs.integers(0, 7)


def test_an_active_passive_pair_chooses_the_first_and_fails_over_once() -> None:
    pair = {"civo/cluster1": True, "civo/cluster2": True}
    first = select(1, pair, ())
    assert first == ("civo/cluster1",)
    down = {**pair, "civo/cluster1": False}
    failed_over = select(1, down, first)
    assert failed_over == ("civo/cluster2",)
    # cluster1 is back: the set stays where it is (it does not move back by itself)
    assert select(1, pair, failed_over) == ("civo/cluster2",)


def test_a_cluster_that_leaves_or_stops_matching_is_replaced() -> None:
    matching = {"a/1": True, "a/2": True, "a/3": True}
    assert select(2, {"a/2": True, "a/3": True}, ("a/1", "a/2")) == ("a/2", "a/3")  # a/1 left
    assert select(2, matching, ("a/1", "x/9")) == ("a/1", "a/2")  # x/9 no longer matches


def test_zero_max_replicas_chooses_nothing_as_upstream() -> None:
    assert select(0, {"a/1": True}, ("a/1",)) == ()


def test_lowering_max_replicas_keeps_the_first_chosen_in_key_order() -> None:
    matching = dict.fromkeys(("a/1", "a/2", "a/3"), True)
    assert select(1, matching, ("a/3", "a/2")) == ("a/2",)


def test_fewer_ready_than_max_replicas_chooses_every_ready_one() -> None:
    assert select(3, {"a/1": True, "a/2": False, "a/3": True}, ()) == ("a/1", "a/3")


def test_replaced_names_what_went_and_what_came() -> None:
    assert replaced(("a/1", "a/2"), ("a/2", "a/3")) == (("a/1",), ("a/3",))


@given(max_replicas=replicas_st, matching=matching_st, current=current_st)
def test_never_more_than_max_replicas_and_only_ready_matching_clusters(
    max_replicas: int, matching: dict[str, bool], current: list[str]
) -> None:
    chosen = select(max_replicas, matching, current)
    assert len(chosen) <= max_replicas
    assert all(matching.get(c) is True for c in chosen)
    assert list(chosen) == sorted(set(chosen))  # sorted, no duplicates


@given(max_replicas=replicas_st, matching=matching_st, current=current_st)
def test_as_many_as_can_be_chosen_are_chosen(
    max_replicas: int, matching: dict[str, bool], current: list[str]
) -> None:
    ready = sum(matching.values())
    assert len(select(max_replicas, matching, current)) == min(max_replicas, ready)


@given(max_replicas=replicas_st, matching=matching_st, current=current_st)
def test_a_still_ready_chosen_cluster_is_never_replaced(
    max_replicas: int, matching: dict[str, bool], current: list[str]
) -> None:
    usable = {c for c in current if matching.get(c)}
    chosen = set(select(max_replicas, matching, current))
    if len(usable) <= max_replicas:
        assert usable <= chosen
    else:  # maxReplicas lowered below what is chosen: only chosen clusters stay, none is added
        assert chosen <= usable


@given(max_replicas=replicas_st, matching=matching_st, current=current_st, seed=hs.randoms())
def test_the_choice_is_stable_and_does_not_depend_on_order(
    max_replicas: int, matching: dict[str, bool], current: list[str], seed: random.Random
) -> None:
    chosen = select(max_replicas, matching, current)
    shuffled = list(current)
    seed.shuffle(shuffled)
    reordered = dict(sorted(matching.items(), reverse=True))
    assert select(max_replicas, reordered, shuffled) == chosen
    assert select(max_replicas, matching, chosen) == chosen  # nothing changed: nothing moves

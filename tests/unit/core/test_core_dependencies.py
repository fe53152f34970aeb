"""Profile dependencies (`dependsOn`) decided without I/O: cycles found and named, clusters held
until every dependency is provisioned there."""

from __future__ import annotations

import itertools
from pathlib import Path

import yaml
from hypothesis import given
from hypothesis import strategies as st

from fleetwave.api.codec import parse_object
from fleetwave.api.sveltos import ClusterProfile
from fleetwave.core import dependencies as deps


def test_a_cycle_is_named_from_the_profile_asked_about() -> None:
    edges = {"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"]}
    assert deps.cycle_through("a", edges) == ("a", "b", "c", "a")
    assert deps.cycle_through("b", edges) == ("b", "c", "a", "b")
    # d depends on a cycle but is not on it: it simply waits, it is not refused.
    assert deps.cycle_through("d", edges) is None


def test_a_profile_depending_on_itself_is_a_cycle() -> None:
    assert deps.cycle_through("a", {"a": ["a"]}) == ("a", "a")


def test_a_chain_or_a_diamond_is_no_cycle() -> None:
    assert deps.cycle_through("a", {"a": ["b", "c"], "b": ["d"], "c": ["d"], "d": []}) is None
    assert deps.cycle_through("a", {"a": ["missing"]}) is None


@given(
    st.dictionaries(st.sampled_from("abcdef"), st.lists(st.sampled_from("abcdef"), max_size=3), max_size=6)
)
def test_a_reported_cycle_is_real(edges: dict[str, list[str]]) -> None:
    for name in edges:
        cycle = deps.cycle_through(name, edges)
        if cycle is None:
            continue
        assert cycle[0] == cycle[-1] == name
        assert all(b in edges.get(a, []) for a, b in itertools.pairwise(cycle))


@given(
    st.dictionaries(st.sampled_from("abcdef"), st.lists(st.sampled_from("abcdef"), max_size=3), max_size=6)
)
def test_no_cycle_is_missed(edges: dict[str, list[str]]) -> None:
    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), list(edges.get(start, []))
        while todo:
            node = todo.pop()
            if node == goal:
                return True
            if node not in seen:
                seen.add(node)
                todo.extend(edges.get(node, []))
        return False

    for name in edges:
        assert (deps.cycle_through(name, edges) is not None) == reaches(name, name)


def test_clusters_are_held_until_every_dependency_is_provisioned_there() -> None:
    provisioned = {("base", "c1"), ("base", "c2"), ("db", "c1")}
    held = deps.unmet(["c1", "c2", "c3"], ["db", "base", "db"], lambda d, c: (d, c) in provisioned)
    assert held == {"c2": ("db",), "c3": ("base", "db")}
    assert deps.unmet(["c1"], [], lambda d, c: False) == {}


def test_the_description_is_bounded() -> None:
    waiting = {f"ns/c{i:02d}": ("base",) for i in range(8)}
    said = deps.describe(waiting, limit=2)
    assert said == "ns/c00 waits for base; ns/c01 waits for base; and 6 more clusters"


def test_the_depends_on_example_orders_routes_after_the_controller_and_has_no_cycle() -> None:
    path = Path(__file__).resolve().parents[3] / "examples" / "profile-depends-on.yaml"
    profiles = [parse_object(d) for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]
    edges = {
        p.metadata.name: list(p.spec.depends_on or []) for p in profiles if isinstance(p, ClusterProfile)
    }
    assert edges == {"ingress-controller": [], "ingress-routes": ["ingress-controller"]}
    assert all(deps.cycle_through(name, edges) is None for name in edges)
    ready = {("prod-1", "ingress-controller")}
    waiting = deps.unmet(["prod-1", "prod-2"], edges["ingress-routes"], lambda p, c: (c, p) in ready)
    assert waiting == {"prod-2": ("ingress-controller",)}

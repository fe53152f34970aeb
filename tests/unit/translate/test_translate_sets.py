"""Cluster sets (ADR 0108): what a set matches, what its status says it chose, and the resolution of
a profile's setRefs into member keys."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as hs

from fleetwave.api.codec import parse_object
from fleetwave.api.sets import SetSpec
from fleetwave.core import model as m
from fleetwave.translate import KEY_LABEL, NAME_LABEL, TranslateError, clusters_of_sets, from_manifests
from fleetwave.translate.sets import MAX_CHOSEN, chosen, matching, ref_problems


def _member(key: str, ready: bool = True, **labels: str) -> m.Cluster:
    return m.Cluster(key, {**labels, NAME_LABEL: key.partition("/")[2], KEY_LABEL: key}, ready)


FLEET = m.Fleet.of(
    [
        _member("civo/cluster1", env="prod"),
        _member("civo/cluster2", False, env="prod"),
        _member("civo/cluster3", env="dev"),
        _member("other/cluster1", env="prod"),
    ]
)


def _spec(**fields: Any) -> SetSpec:
    return SetSpec.model_validate(fields)


def test_a_cluster_set_matches_its_selector_and_its_refs_with_their_readiness() -> None:
    spec = _spec(
        clusterSelector={"matchLabels": {"env": "prod"}},
        clusterRefs=[{"namespace": "civo", "name": "cluster3", "kind": "SveltosCluster"}],
        maxReplicas=1,
    )
    assert matching(spec, None, FLEET) == {
        "civo/cluster1": True,
        "civo/cluster2": False,
        "civo/cluster3": True,
        "other/cluster1": True,
    }


def test_an_empty_selector_matches_no_cluster_by_label() -> None:
    assert matching(_spec(clusterSelector={}), None, FLEET) == {}
    assert matching(_spec(), None, FLEET) == {}
    ref = _spec(clusterRefs=[{"name": "cluster1"}])  # no namespace: `default` in a ClusterSet
    assert matching(ref, None, FLEET) == {}


def test_a_set_matches_only_clusters_of_its_namespace_and_reads_its_refs_there() -> None:
    spec = _spec(
        clusterSelector={"matchLabels": {"env": "prod"}},
        clusterRefs=[{"namespace": "elsewhere", "name": "cluster3"}],  # read as civo/cluster3
    )
    assert matching(spec, "civo", FLEET) == {
        "civo/cluster1": True,
        "civo/cluster2": False,
        "civo/cluster3": True,
    }


CAPI = "cluster.x-k8s.io/v1beta1"


def test_a_set_names_clusters_by_kind_and_a_cluster_api_cluster_is_not_a_member_of_its_name() -> None:
    """A ref of kind Cluster names the Cluster API cluster civo/cluster1, not the registered member
    of that name; a ref naming no kind of cluster matches nothing and is said, by field."""
    fleet = m.Fleet.of([*FLEET.by_name.values(), _member("capi:civo/cluster1", env="edge")])
    spec = _spec(
        clusterRefs=[
            {"apiVersion": CAPI, "kind": "Cluster", "namespace": "civo", "name": "cluster1"},
            {"kind": "ConfigMap", "namespace": "civo", "name": "cluster3"},
        ]
    )
    assert matching(spec, None, fleet) == {"capi:civo/cluster1": True}
    assert matching(spec, "civo", fleet) == {"capi:civo/cluster1": True}
    assert matching(_spec(clusterSelector={"matchLabels": {"env": "edge"}}), "other", fleet) == {}
    assert ref_problems(spec) == [
        "spec.clusterRefs[1].kind: ConfigMap is not a kind of cluster "
        "(expected one of Cluster, MemberCluster, SveltosCluster)"
    ]
    refs = [{"apiVersion": CAPI, "kind": "Cluster", "namespace": "civo", "name": "cluster1"}]
    refs.append({"apiVersion": "v1", "kind": "Secret", "namespace": "civo", "name": "x"})
    assert chosen(_set(refs)) == ("capi:civo/cluster1",)


def _set(refs: Any, namespace: str | None = None) -> dict[str, Any]:
    meta = {"name": "s", **({"namespace": namespace} if namespace else {})}
    return {"metadata": meta, "status": {"selectedClusterRefs": refs}}


def test_chosen_reads_the_status_refs_and_skips_what_is_malformed() -> None:
    refs = [
        {
            "apiVersion": "lib.projectsveltos.io/v1beta1",
            "kind": "SveltosCluster",
            "namespace": "civo",
            "name": "a",
        },
        {"name": "b"},  # the set's own namespace
        {"namespace": "civo"},  # no name
        "civo/c",  # not a reference
        {"namespace": "civo", "name": "a"},  # twice
    ]
    assert chosen(_set(refs)) == ("civo/a", "default/b")
    assert chosen(_set(refs, "team")) == ("civo/a", "team/b")
    assert chosen(_set("civo/a")) == ()
    assert chosen(None) == ()
    assert chosen({"status": None}) == ()


def test_chosen_reads_a_bounded_number_of_refs() -> None:
    refs = [{"namespace": "n", "name": f"c{i}"} for i in range(MAX_CHOSEN + 5)]
    assert len(chosen(_set(refs))) == MAX_CHOSEN


def test_set_resolution_is_the_union_of_the_named_sets_choices_and_a_missing_set_adds_nothing() -> None:
    sets = {
        "prod": _set([{"namespace": "civo", "name": "a"}]),
        "edge": _set([{"namespace": "civo", "name": "b"}, {"namespace": "civo", "name": "a"}]),
        "other": _set([{"namespace": "civo", "name": "z"}]),
    }
    assert clusters_of_sets(["prod", "edge", "gone"], {**sets, "gone": None}) == {"civo/a", "civo/b"}
    assert clusters_of_sets([], sets) == frozenset()


@given(
    names=hs.lists(hs.sampled_from(["s1", "s2", "s3", "missing"]), max_size=4),
    choices=hs.dictionaries(
        hs.sampled_from(["s1", "s2", "s3"]), hs.lists(hs.sampled_from(["a", "b", "c"]), max_size=3)
    ),
)
def test_set_resolution_never_names_a_cluster_no_named_set_chose(
    names: list[str], choices: dict[str, list[str]]
) -> None:
    sets = {n: _set([{"namespace": "ns", "name": c} for c in cs]) for n, cs in choices.items()}
    resolved = clusters_of_sets(names, sets)
    assert resolved == {f"ns/{c}" for n in names for c in choices.get(n, [])}


def test_plan_refuses_a_profile_naming_cluster_sets_by_the_field() -> None:
    profile = parse_object(
        {
            "apiVersion": "config.projectsveltos.io/v1beta1",
            "kind": "ClusterProfile",
            "metadata": {"name": "p"},
            "spec": {"setRefs": ["prod"], "clusterSelector": {"matchLabels": {"env": "prod"}}},
        }
    )
    with pytest.raises(TranslateError, match=r"^spec\.setRefs: cluster sets choose their clusters"):
        from_manifests([profile])

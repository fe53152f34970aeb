"""clusterRefs honour kind (ADR 0109): a SveltosCluster dev/c1 and a Cluster API Cluster dev/c1 are two
clusters, and a ref names exactly one of them, in its namespace, wherever a cluster is selected
(profiles, and the stage profiles a promotion writes)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as hs

from fleetwave.api import families
from fleetwave.api.codec import parse_object
from fleetwave.api.models import ClusterProfile
from fleetwave.controllers.fleet import members
from fleetwave.controllers.sveltos import rollout_facts
from fleetwave.core import selectors
from fleetwave.translate import KEY_LABEL, KIND_LABEL, TranslateError, from_profile

CAPI_V1BETA1 = "cluster.x-k8s.io/v1beta1"


def profile(refs: list[dict[str, Any]]) -> ClusterProfile:
    obj = parse_object(
        {
            "apiVersion": "config.projectsveltos.io/v1beta1",
            "kind": "ClusterProfile",
            "metadata": {"name": "p"},
            "spec": {
                "clusterRefs": refs,
                "policyRefs": [{"kind": "ConfigMap", "name": "c", "namespace": "x"}],
            },
        }
    )
    assert isinstance(obj, ClusterProfile)
    return obj


def selected_keys(refs: list[dict[str, Any]]) -> tuple[str, ...]:
    selector = from_profile(profile(refs)).stages[0].selector
    assert selector is not None
    (requirement,) = selector.match_expressions
    assert requirement.key == KEY_LABEL
    return requirement.values


def test_kind_cluster_names_a_cluster_api_cluster_any_other_kind_a_registered_one() -> None:
    refs = [
        {"kind": "Cluster", "apiVersion": CAPI_V1BETA1, "namespace": "dev", "name": "c1"},
        {"kind": "Cluster", "apiVersion": "cluster.x-k8s.io/v1beta2", "namespace": "dev", "name": "c2"},
        {"kind": "Cluster", "namespace": "dev", "name": "c3"},
        {"apiVersion": CAPI_V1BETA1, "namespace": "dev", "name": "c4"},  # Sveltos reads the group
        {
            "kind": "SveltosCluster",
            "apiVersion": "lib.projectsveltos.io/v1beta1",
            "namespace": "dev",
            "name": "c1",
        },
        {"kind": "MemberCluster", "apiVersion": "fleetwave.io/v1alpha1", "namespace": "dev", "name": "c5"},
        {"namespace": "dev", "name": "c6"},  # no kind: a SveltosCluster, as upstream
    ]
    assert selected_keys(refs) == (
        "capi:dev/c1",
        "capi:dev/c2",
        "capi:dev/c3",
        "capi:dev/c4",
        "dev/c1",
        "dev/c5",
        "dev/c6",
    )


@pytest.mark.parametrize(
    ("ref", "field", "message"),
    [
        ({"kind": "Machine", "apiVersion": CAPI_V1BETA1}, "kind", "Machine is not a kind of cluster"),
        (
            {"kind": "Cluster", "apiVersion": "lib.projectsveltos.io/v1beta1"},
            "apiVersion",
            "not lib.projectsveltos.io",
        ),
        ({"kind": "SveltosCluster", "apiVersion": CAPI_V1BETA1}, "apiVersion", "not cluster.x-k8s.io"),
        ({"apiVersion": "example.com/v1"}, "apiVersion", "example.com serves no kind of cluster"),
        ({"kind": "Cluster", "apiVersion": "v1"}, "apiVersion", "v1 is not the group/version"),
    ],
)
def test_a_ref_naming_no_kind_of_cluster_is_refused_naming_its_field(
    ref: dict[str, Any], field: str, message: str
) -> None:
    refs = [{"namespace": "dev", "name": "ok"}, {**ref, "namespace": "dev", "name": "c1"}]
    with pytest.raises(TranslateError, match=rf"^spec\.clusterRefs\[1\]\.{field}: .*{message}"):
        from_profile(profile(refs))


NAMESPACES = ("dev", "prod")
NAMES = ("c1", "c2")
# A ref's way of naming a registered member, or a Cluster API cluster (True).
REF_FORMS: list[tuple[dict[str, str], bool]] = [
    ({}, False),
    ({"kind": "SveltosCluster"}, False),
    ({"kind": "SveltosCluster", "apiVersion": "lib.projectsveltos.io/v1beta1"}, False),
    ({"kind": "MemberCluster", "apiVersion": "fleetwave.io/v1alpha1"}, False),
    ({"apiVersion": "lib.projectsveltos.io/v1beta1"}, False),
    ({"kind": "Cluster"}, True),
    ({"kind": "Cluster", "apiVersion": CAPI_V1BETA1}, True),
    ({"kind": "Cluster", "apiVersion": "cluster.x-k8s.io/v1beta2"}, True),
    ({"apiVersion": CAPI_V1BETA1}, True),
]


def _member(capi: bool, namespace: str, name: str) -> members.Member:
    """A member as the controller builds it from its object: a SveltosCluster (native form) or a
    ready Cluster API Cluster."""
    meta = {"name": name, "namespace": namespace, "labels": {"env": "dev"}}
    if capi:
        status = {"initialization": {"controlPlaneInitialized": True}}
        return members.from_capi({"metadata": meta, "spec": {}, "status": status})
    return members.from_object({"metadata": meta, "spec": {}, "status": {"ready": True}})


@given(
    refs=hs.lists(
        hs.tuples(
            hs.sampled_from(range(len(REF_FORMS))), hs.sampled_from(NAMESPACES), hs.sampled_from(NAMES)
        ),
        min_size=1,
    ),
    clusters=hs.sets(
        hs.tuples(hs.booleans(), hs.sampled_from(NAMESPACES), hs.sampled_from(NAMES)), min_size=1
    ),
)
def test_no_cluster_ref_ever_matches_a_cluster_of_another_namespace_or_kind(
    refs: list[tuple[int, str, str]], clusters: set[tuple[bool, str, str]]
) -> None:
    written = [{**REF_FORMS[form][0], "namespace": ns, "name": name} for form, ns, name in refs]
    named = {(REF_FORMS[form][1], ns, name) for form, ns, name in refs}
    selector = from_profile(profile(written)).stages[0].selector
    fleet = members.fleet((_member(*c) for c in clusters), registered_kind="SveltosCluster")
    assert fleet.names == {members.member_key(ns, n, capi=capi) for capi, ns, n in clusters}
    for capi, ns, name in clusters:
        cluster = fleet.by_name[members.member_key(ns, name, capi=capi)]
        assert cluster.labels[KIND_LABEL] == ("Cluster" if capi else "SveltosCluster")
        assert selectors.matches(selector, cluster.labels) == ((capi, ns, name) in named), cluster.name


@given(
    keys=hs.sets(
        hs.builds(
            members.member_key, hs.sampled_from(NAMESPACES), hs.sampled_from(NAMES), capi=hs.booleans()
        ),
        min_size=1,
    ),
    others=hs.sets(
        hs.builds(members.member_key, hs.sampled_from(NAMESPACES), hs.sampled_from(NAMES), capi=hs.booleans())
    ),
    family=hs.sampled_from([families.NATIVE, families.SVELTOS]),
)
def test_a_stage_profile_selects_exactly_the_clusters_its_promotion_gave_it(
    keys: set[str], others: set[str], family: families.Family
) -> None:
    """A promotion writes a stage profile's clusterRefs with `rollout_facts.cluster_ref`; read back,
    they select those clusters and no other, whichever kind each is."""
    refs = [rollout_facts.cluster_ref(k, family) for k in sorted(keys)]
    selector = from_profile(profile(refs)).stages[0].selector
    for key in keys | others:
        labels = {KEY_LABEL: key}
        assert selectors.matches(selector, labels) == (key in keys), key


def test_a_cluster_api_clusters_ref_is_what_sveltos_writes() -> None:
    assert rollout_facts.cluster_ref("capi:dev/c1", families.SVELTOS) == {
        "apiVersion": CAPI_V1BETA1,
        "kind": "Cluster",
        "namespace": "dev",
        "name": "c1",
    }
    assert rollout_facts.cluster_ref("dev/c1", families.SVELTOS)["kind"] == "SveltosCluster"

"""--placement-kind: what may be named, and the read-only RBAC it becomes (ADR 0091)."""

from __future__ import annotations

import pytest

from fleetwave.kube import kinds
from fleetwave.mgmt import placement_kinds, rbac


@pytest.mark.parametrize(
    ("text", "gvk"),
    [
        ("networking.k8s.io/v1/Ingress", kinds.GVK("networking.k8s.io/v1", "Ingress")),
        ("v1/PersistentVolumeClaim", kinds.GVK("v1", "PersistentVolumeClaim")),
        (" example.com/v1alpha1/Widget ", kinds.GVK("example.com/v1alpha1", "Widget")),
    ],
)
def test_a_kind_is_written_group_version_kind(text: str, gvk: kinds.GVK) -> None:
    assert placement_kinds.parse(text) == gvk


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("Ingress", "write group/version/Kind"),
        ("networking.k8s.io/v1/ingress", "write group/version/Kind"),
        ("a/b/c/D", "write group/version/Kind"),
        ("fleetwave.io/v1alpha1/ClusterProfile", "never placed"),
        ("placement.kubernetes-fleet.io/v1beta1/ClusterResourcePlacement", "never placed"),
        ("coordination.k8s.io/v1/Lease", "never placed"),
        ("v1/Pod", "not content to place"),
    ],
)
def test_what_cannot_be_placed_is_refused_saying_why(text: str, why: str) -> None:
    with pytest.raises(placement_kinds.PlacementKindError, match=why):
        placement_kinds.parse(text)


WIDGETS = kinds.KindInfo(kinds.GVK("example.com/v1", "Widget"), "widgets", True)
GADGETS = kinds.KindInfo(kinds.GVK("example.com/v1", "Gadget"), "gadgets", False)
CRDS = kinds.KindInfo(
    kinds.GVK("apiextensions.k8s.io/v1", "CustomResourceDefinition"), "customresourcedefinitions", False
)


def test_the_controller_may_only_read_the_kinds_it_places() -> None:
    rules = [r.manifest() for r in rbac.placement_kind_rules([WIDGETS, GADGETS, CRDS])]
    assert rules == [
        {
            "apiGroups": ["apiextensions.k8s.io"],
            "resources": ["customresourcedefinitions"],
            "verbs": ["get", "list", "watch"],
        },
        {
            "apiGroups": ["example.com"],
            "resources": ["gadgets", "widgets"],
            "verbs": ["get", "list", "watch"],
        },
    ]


def test_with_watched_namespaces_a_namespaced_kind_is_read_only_there_and_a_cluster_one_everywhere() -> None:
    docs = rbac.placement_kind_documents("fleetwave-system", [WIDGETS, GADGETS], ("team-a",))
    roles = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ClusterRole"}
    assert roles[rbac.PLACEMENT_KINDS_NAME]["rules"][0]["resources"] == ["gadgets"]
    assert roles[f"{rbac.PLACEMENT_KINDS_NAME}-watched"]["rules"][0]["resources"] == ["widgets"]
    bound = sorted(d["metadata"].get("namespace", "") for d in docs if d["kind"] == "RoleBinding")
    assert bound == ["fleetwave-system", "team-a"]

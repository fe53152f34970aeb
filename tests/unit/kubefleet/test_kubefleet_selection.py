"""What a placement selects, and how objects are cleaned into applicable manifests."""

from __future__ import annotations

from typing import Any

import pytest

from fleetwave.api import families
from fleetwave.api.kubefleet import PlacementSpec
from fleetwave.controllers.fleet import members
from fleetwave.controllers.kubefleet import selection
from fleetwave.kube import kinds


def obj(kind: str, name: str, namespace: str | None = None, **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "uid": "u", "resourceVersion": "7", "managedFields": [{}]}
    if namespace:
        meta["namespace"] = namespace
    meta.update(extra.pop("meta", {}))
    return {"metadata": meta, "status": {"x": 1}, **extra}


HUB = {
    "Namespace": [obj("Namespace", "app"), obj("Namespace", "kube-system"), obj("Namespace", "other")],
    "ConfigMap": [
        obj("ConfigMap", "cm", "app", data={"k": "v"}),
        obj("ConfigMap", "kube-root-ca.crt", "app", data={}),
        obj("ConfigMap", "elsewhere", "other", data={}),
    ],
    "Secret": [obj("Secret", "tok", "app", type="kubernetes.io/service-account-token")],
    "ServiceAccount": [obj("ServiceAccount", "default", "app"), obj("ServiceAccount", "sa", "app")],
    "Service": [
        obj("Service", "svc", "app", spec={"clusterIP": "10.0.0.1", "clusterIPs": ["10.0.0.1"], "ports": []})
    ],
    "Job": [
        obj(
            "Job",
            "job",
            "app",
            spec={
                "selector": {"matchLabels": {"controller-uid": "x"}},
                "template": {"metadata": {"labels": {"controller-uid": "x", "a": "b"}}},
            },
        )
    ],
    "ReplicaSet": [],
}


def lister(kind: str) -> list[dict[str, Any]]:
    return HUB.get(kind, [])


def spec(*selectors: dict[str, Any]) -> PlacementSpec:
    return PlacementSpec.model_validate({"resourceSelectors": list(selectors)})


def names(selected: list[dict[str, Any]]) -> list[str]:
    return [f"{o['kind']}/{o['metadata']['name']}" for o in selected]


def test_a_namespace_selector_takes_the_namespace_and_everything_user_made_inside_it() -> None:
    picked = selection.select(
        spec({"group": "", "version": "v1", "kind": "Namespace", "name": "app"}), lister, namespace=None
    )
    assert names(picked) == ["Namespace/app", "ConfigMap/cm", "ServiceAccount/sa", "Service/svc", "Job/job"]


def test_cleaning_strips_server_fields_and_per_cluster_allocations() -> None:
    picked = {
        o["kind"]: o
        for o in selection.select(
            spec({"group": "", "version": "v1", "kind": "Namespace", "name": "app"}), lister, namespace=None
        )
    }
    assert picked["ConfigMap"] == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "cm", "namespace": "app"},
        "data": {"k": "v"},
    }
    assert "clusterIP" not in picked["Service"]["spec"]
    assert "clusterIPs" not in picked["Service"]["spec"]
    assert "selector" not in picked["Job"]["spec"]
    assert picked["Job"]["spec"]["template"]["metadata"]["labels"] == {"a": "b"}


def test_the_content_of_a_namespace_the_controller_does_not_watch_is_refused_not_left_out() -> None:
    whole = spec({"group": "", "version": "v1", "kind": "Namespace", "labelSelector": {}})
    watched = frozenset({"app", "fleetwave-system"})
    with pytest.raises(
        selection.SelectionError, match=r"selects the content of namespace other is not watched"
    ):
        selection.select(whole, lister, namespace=None, watched=watched)
    one = spec({"group": "", "version": "v1", "kind": "Namespace", "name": "app"})
    assert "ConfigMap/cm" in names(selection.select(one, lister, namespace=None, watched=watched))
    # The Namespace object alone is cluster-scoped and visible: NamespaceOnly needs no watch.
    only = spec(
        {
            "group": "",
            "version": "v1",
            "kind": "Namespace",
            "labelSelector": {},
            "selectionScope": "NamespaceOnly",
        }
    )
    assert names(selection.select(only, lister, namespace=None, watched=watched)) == [
        "Namespace/app",
        "Namespace/other",
    ]


def test_namespace_only_and_reserved_namespaces() -> None:
    only = spec(
        {
            "group": "",
            "version": "v1",
            "kind": "Namespace",
            "labelSelector": {},
            "selectionScope": "NamespaceOnly",
        }
    )
    assert names(selection.select(only, lister, namespace=None)) == ["Namespace/app", "Namespace/other"]


def test_namespace_with_resource_selectors_takes_only_what_the_other_selectors_match() -> None:
    picked = selection.select(
        spec(
            {
                "group": "",
                "version": "v1",
                "kind": "Namespace",
                "name": "app",
                "selectionScope": "NamespaceWithResourceSelectors",
            },
            {"group": "", "version": "v1", "kind": "ServiceAccount", "name": "sa"},
        ),
        lister,
        namespace=None,
    )
    assert names(picked) == ["Namespace/app", "ServiceAccount/sa"]


def test_a_resource_placement_selects_in_its_own_namespace_only() -> None:
    picked = selection.select(
        spec({"group": "", "version": "v1", "kind": "ConfigMap", "labelSelector": {}}),
        lister,
        namespace="other",
    )
    assert names(picked) == ["ConfigMap/elsewhere"]


@pytest.mark.parametrize(
    ("selector", "namespace", "message"),
    [
        ({"group": "apps", "version": "v1", "kind": "ReplicaSet", "name": "x"}, None, "not supported"),
        ({"group": "", "version": "v1", "kind": "Namespace", "name": "x"}, "app", "namespaced kinds only"),
        (
            {"group": "", "version": "v1", "kind": "ConfigMap", "name": "x"},
            None,
            "NamespaceWithResourceSelectors",
        ),
    ],
)
def test_selectors_a_placement_cannot_honour_are_reported(
    selector: dict[str, Any], namespace: str | None, message: str
) -> None:
    with pytest.raises(selection.SelectionError, match=message):
        selection.select(spec(selector), lister, namespace=namespace)


def test_member_kubeconfig_secrets_are_never_selected_only_user_secrets_are() -> None:
    hub = {
        "Namespace": [obj("Namespace", "team")],
        "Secret": [
            obj("Secret", "app-creds", "team", data={"k": "dg=="}),
            obj("Secret", "m1-kubeconfig", "team", meta={"labels": {"fleetwave.io/member-cluster": "m1"}}),
            obj("Secret", "unlabelled-kubeconfig", "team", data={"kubeconfig": "eA=="}),
        ],
        "MemberCluster": [
            obj(
                "MemberCluster", "m2", "team", spec={"kubeconfigSecretRef": {"name": "unlabelled-kubeconfig"}}
            )
        ],
    }
    picked = selection.select(
        spec({"group": "", "version": "v1", "kind": "Namespace", "name": "team"}),
        lambda kind: hub.get(kind, []),
        namespace=None,
        credentials=members.kubeconfig_secrets(hub["MemberCluster"]),
    )
    assert names(picked) == ["Namespace/team", "Secret/app-creds"]


def test_a_sveltos_clusters_default_kubeconfig_secret_is_a_credential_too() -> None:
    hub = {
        "Namespace": [obj("Namespace", "dev")],
        "Secret": [obj("Secret", "dev01-sveltos-kubeconfig", "dev", data={"value": "eA=="})],
    }
    cluster = {"apiVersion": "lib.projectsveltos.io/v1beta1", "kind": "SveltosCluster"}
    cluster["metadata"] = {"name": "dev01", "namespace": "dev"}
    as_member = families.SVELTOS.view("MemberCluster", cluster)
    picked = selection.select(
        spec({"group": "", "version": "v1", "kind": "Namespace", "name": "dev"}),
        lambda kind: hub.get(kind, []),
        namespace=None,
        credentials=members.kubeconfig_secrets([as_member]),
    )
    assert names(picked) == ["Namespace/dev"]


WIDGETS = kinds.KindInfo(kinds.GVK("example.com/v1", "Widget"), "widgets", True)
CRDS = kinds.KindInfo(
    kinds.GVK("apiextensions.k8s.io/v1", "CustomResourceDefinition"), "customresourcedefinitions", False
)
INGRESSES = kinds.KindInfo(kinds.GVK("networking.k8s.io/v1", "Ingress"), "ingresses", True)
EXTRA = selection.configured([WIDGETS, CRDS, INGRESSES])
WITH_EXTRA = {
    **HUB,
    "Widget.v1.example.com": [obj("Widget", "w", "app", spec={"size": 3}), obj("Widget", "w2", "other")],
    "CustomResourceDefinition.v1.apiextensions.k8s.io": [
        obj("CustomResourceDefinition", "widgets.example.com", spec={"group": "example.com"})
    ],
    "Ingress.v1.networking.k8s.io": [obj("Ingress", "web", "app", spec={"rules": []})],
}


def test_a_configured_kind_is_selected_by_group_version_kind_and_taken_with_its_namespace() -> None:
    picked = selection.select(
        spec(
            {"group": "", "version": "v1", "kind": "Namespace", "name": "app"},
            {
                "group": "apiextensions.k8s.io",
                "version": "v1",
                "kind": "CustomResourceDefinition",
                "name": "widgets.example.com",
            },
        ),
        lambda k: WITH_EXTRA.get(k, []),
        namespace=None,
        extra=EXTRA,
    )
    # Cluster-scoped first (the namespace, the CRD), then what lives in the namespace, custom ones too.
    assert names(picked)[:2] == ["Namespace/app", "CustomResourceDefinition/widgets.example.com"]
    assert {"Widget/w", "Ingress/web"} <= set(names(picked))
    assert "Widget/w2" not in names(picked)
    widget = next(o for o in picked if o["kind"] == "Widget")
    assert widget == {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w", "namespace": "app"},
        "spec": {"size": 3},
    }


def test_a_kind_not_configured_is_refused_saying_how_to_place_it() -> None:
    with pytest.raises(
        selection.SelectionError, match=r"example.com/Widget is not supported .*--placement-kind"
    ):
        selection.select(
            spec({"group": "example.com", "version": "v1", "kind": "Widget"}), lister, namespace=None
        )
    with pytest.raises(selection.SelectionError, match=r"example\.com/Widget is not supported"):
        selection.select(
            spec({"group": "example.com", "version": "v2", "kind": "Widget", "name": "w"}),
            lambda k: WITH_EXTRA.get(k, []),
            namespace="app",
            extra=EXTRA,
        )


def test_a_resource_placement_selects_a_configured_namespaced_kind_in_its_namespace() -> None:
    picked = selection.select(
        spec({"group": "networking.k8s.io", "version": "v1", "kind": "Ingress", "name": "web"}),
        lambda k: WITH_EXTRA.get(k, []),
        namespace="app",
        extra=EXTRA,
    )
    assert names(picked) == ["Ingress/web"]


def test_configuring_a_built_in_kind_changes_nothing() -> None:
    config_maps = kinds.KindInfo(kinds.GVK("v1", "ConfigMap"), "configmaps", True)
    assert selection.configured([config_maps]) == ()


NS_BY_LABEL = {"kind": "Namespace", "labelSelector": {"matchLabels": {"team": "a"}}}


@pytest.mark.parametrize(
    ("selectors", "kind", "namespace", "labels", "wakes"),
    [
        ([{"kind": "Namespace", "name": "app"}], "ConfigMap", "app", {}, True),
        ([{"kind": "Namespace", "name": "app"}], "ConfigMap", "other", {}, False),
        ([NS_BY_LABEL], "ConfigMap", "x", {"team": "a"}, True),
        ([NS_BY_LABEL], "ConfigMap", "x", {"team": "b"}, False),
        ([NS_BY_LABEL], "ConfigMap", "x", None, True),  # the namespace is not in the cache yet
        ([{"kind": "Namespace"}], "Secret", "any", {}, True),  # every namespace
        ([{"kind": "Namespace", "labelSelector": {"matchLabels": 3}}], "Secret", "x", {}, True),
        ([{"kind": "ClusterRole"}], "ClusterRole", None, None, True),
        ([{"kind": "ClusterRole"}], "ConfigMap", "app", {}, False),
        ([{"kind": "Namespace", "name": "app"}], "ClusterRole", None, None, False),
        ("not a list", "ConfigMap", "app", {}, False),
        ([7, {"kind": "Namespace", "name": "app"}], "ConfigMap", "app", {}, True),
    ],
)
def test_a_change_may_matter_only_to_a_placement_that_could_select_it(
    selectors: object, kind: str, namespace: str | None, labels: dict[str, str] | None, wakes: bool
) -> None:
    assert selection.may_select(selectors, kind, namespace, labels) is wakes

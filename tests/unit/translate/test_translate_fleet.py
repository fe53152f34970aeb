"""Fleet files: `clusters:` lists and registration objects; every error names its field."""

from __future__ import annotations

import pytest

from fleetwave.api.codec import parse_object
from fleetwave.api.models import ClusterPromotion
from fleetwave.core import model as m
from fleetwave.translate import (
    KEY_LABEL,
    NAME_LABEL,
    TranslateError,
    fleet_from_yaml,
    from_promotion,
    selector_problems,
)


def test_list_form_coerces_scalar_labels_and_adds_the_name_label() -> None:
    fleet = fleet_from_yaml("clusters:\n- {name: a, labels: {env: dev, order: 1, canary: true}}\n- name: b\n")
    assert fleet.names == {"a", "b"}
    assert fleet.by_name["a"].labels == {
        "env": "dev",
        "order": "1",
        "canary": "true",
        NAME_LABEL: "a",
        KEY_LABEL: "default/a",
    }
    assert fleet.by_name["b"].ready


def test_registration_objects_of_every_family_mix_with_a_list() -> None:
    text = """
clusters: [{name: listed, labels: {env: dev}}]
---
apiVersion: lib.projectsveltos.io/v1beta1
kind: SveltosCluster
metadata: {name: sveltos-one, namespace: mgmt, labels: {env: staging}}
spec: {}
---
apiVersion: cluster.kubernetes-fleet.io/v1beta1
kind: MemberCluster
metadata: {name: fleet-one, labels: {env: prod}}
spec: {identity: {kind: User, name: fleet-member}}
---
apiVersion: fleetwave.io/v1alpha1
kind: MemberCluster
metadata: {name: paused-one, namespace: fleet}
spec: {paused: true}
"""
    fleet = fleet_from_yaml(text)
    assert fleet.names == {"listed", "sveltos-one", "fleet-one", "paused-one"}
    assert fleet.by_name["sveltos-one"].labels["env"] == "staging"
    assert not fleet.by_name["paused-one"].ready


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("clusters:\n- {labels: {env: dev}}\n", "clusters[0].name: required field is missing"),
        (
            "clusters:\n- {name: a, labels: {env: [x]}}\n",
            "clusters[0].labels.env: label values must be strings",
        ),
        ("clusters:\n- {name: a, zone: x}\n", "clusters[0].zone: unknown field"),
        ("clusters:\n- {name: a}\n- {name: a}\n", "clusters: duplicate cluster name 'a'"),
        ("clusters: {a: 1}\n", "clusters: expected a list"),
        ("nodes: []\n", "clusters: required field is missing"),
        ("clusters: []\n", "clusters: the fleet has no clusters"),
        ("clusters: [\n", "invalid YAML"),
        (
            "clusters: [{name: a}]\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
            "document 2: apiVersion: unsupported apiVersion 'v1'",
        ),
        (
            "clusters: [{name: a}]\n---\napiVersion: fleetwave.io/v1alpha1\nkind: ClusterProfile\n"
            "metadata: {name: x}\n",
            "document 2: kind: ClusterProfile is not a cluster registration",
        ),
        (
            "apiVersion: fleetwave.io/v1alpha1\nkind: MemberCluster\nmetadata: {name: x}\nspec: {bogus: 1}\n",
            "spec.bogus: unknown field",
        ),
    ],
)
def test_bad_fleet_files_name_the_field(text: str, needle: str) -> None:
    with pytest.raises(TranslateError) as err:
        fleet_from_yaml(text)
    assert needle in str(err.value)


def test_selector_matching_no_cluster_is_reported_with_its_path() -> None:
    obj = parse_object(
        {
            "apiVersion": "fleetwave.io/v1alpha1",
            "kind": "ClusterPromotion",
            "metadata": {"name": "p"},
            "spec": {
                "stages": [
                    {"name": "dev", "clusterSelector": {"matchLabels": {"env": "dev"}}},
                    {"name": "empty"},
                    {"name": "qa", "clusterSelector": {"matchLabels": {"env": "qa"}}},
                ]
            },
        }
    )
    assert isinstance(obj, ClusterPromotion)
    fleet = m.Fleet.of([m.Cluster("a", {"env": "dev"})])
    paths = tuple(f"spec.stages[{i}].clusterSelector" for i in range(3))
    problems = [str(p) for p in selector_problems(from_promotion(obj), fleet, paths)]
    assert problems == [
        "spec.stages[1].clusterSelector: is empty and matches no cluster (stage empty)",
        "spec.stages[2].clusterSelector: matches no cluster (stage qa: env=qa)",
    ]

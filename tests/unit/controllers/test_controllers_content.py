"""Content resolution and pinning: what a profile delivers, hashed by value."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

import pytest
import yaml

from fleetwave.api.sveltos import ClusterProfileSpec, ProfileSpec
from fleetwave.controllers.sveltos import content


class Objects:
    def __init__(self, objects: dict[tuple[str, str, str], dict[str, Any]]) -> None:
        self.objects = objects

    def get(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        return self.objects.get((kind, namespace, name))


def _policy(message: str) -> dict[str, Any]:
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "greeting", "namespace": "default"},
        "data": {"message": message},
    }
    return {"data": {"a.yaml": yaml.safe_dump(cm)}}


def _spec(**extra: Any) -> ProfileSpec:
    return ProfileSpec.model_validate(
        {"policyRefs": [{"kind": "ConfigMap", "name": "greeting", "namespace": "fw"}], **extra}
    )


def test_the_hash_follows_the_referenced_data_not_just_the_spec() -> None:
    v1 = content.resolve(
        _spec(),
        Objects({("ConfigMap", "fw", "greeting"): _policy("v1")}),
        default_namespace="fw",
        path="spec",
    )
    v2 = content.resolve(
        _spec(),
        Objects({("ConfigMap", "fw", "greeting"): _policy("v2")}),
        default_namespace="fw",
        path="spec",
    )
    assert v1.hash != v2.hash
    assert v1.body["policies"][0]["objects"][0]["data"] == {"message": "v1"}
    assert v1.snapshot_name.startswith(content.SNAPSHOT_PREFIX)
    assert content.load_snapshot(content.snapshot_configmap(v1, "fw")) == v1.body


def test_a_missing_reference_names_the_field() -> None:
    with pytest.raises(content.ContentError, match=r"spec\.policyRefs\[0\]: ConfigMap fw/greeting not found"):
        content.resolve(_spec(), Objects({}), default_namespace="fw", path="spec")


def test_an_optional_missing_reference_is_skipped() -> None:
    spec = ProfileSpec.model_validate(
        {"policyRefs": [{"kind": "ConfigMap", "name": "nope", "namespace": "fw", "optional": True}]}
    )
    assert content.resolve(spec, Objects({}), default_namespace="fw", path="spec").body["policies"] == []


def test_helm_values_merge_inline_then_values_from_in_order() -> None:
    secret_values = base64.b64encode(yaml.safe_dump({"image": {"tag": "2"}}).encode()).decode()
    spec = ProfileSpec.model_validate(
        {
            "helmCharts": [
                {
                    "repositoryURL": "http://127.0.0.1/",
                    "repositoryName": "r",
                    "chartName": "r/c",
                    "chartVersion": "1",
                    "releaseName": "c",
                    "releaseNamespace": "c",
                    "values": "image:\n  repo: x\n  tag: '1'\nreplicas: 2\n",
                    "valuesFrom": [{"kind": "ConfigMap", "name": "v1"}, {"kind": "Secret", "name": "v2"}],
                }
            ]
        }
    )
    objects = Objects(
        {
            ("ConfigMap", "fw", "v1"): {"data": {"values": "replicas: 3\n"}},
            ("Secret", "fw", "v2"): {
                "type": "addons.projectsveltos.io/cluster-profile",
                "data": {"values": secret_values},
            },
        }
    )
    resolved = content.resolve(spec, objects, default_namespace="fw", path="spec")
    assert resolved.body["helmCharts"][0]["values"] == {"image": {"repo": "x", "tag": "2"}, "replicas": 3}


@pytest.mark.parametrize(
    ("field", "value", "refused"),
    [
        (
            "kustomizationRefs",
            [{"kind": "ConfigMap", "name": "k", "namespace": "fw", "remoteURL": {"url": "https://x/y.tgz"}}],
            r"spec\.kustomizationRefs\[0\]\.remoteURL: remote URLs are not supported",
        ),
        (
            "kustomizationRefs",
            [{"kind": "ConfigMap", "name": "k", "namespace": "fw", "deploymentType": "Local"}],
            r"spec\.kustomizationRefs\[0\]\.deploymentType: Local kustomizations are not supported",
        ),
    ],
)
def test_kustomization_options_not_delivered_yet_are_refused_by_name(
    field: str, value: Any, refused: str
) -> None:
    with pytest.raises(content.ContentError, match=refused):
        content.resolve(
            _spec(**{field: value}),
            Objects({("ConfigMap", "fw", "greeting"): _policy("v1")}),
            default_namespace="fw",
            path="spec",
        )


CHART = {
    "repositoryURL": "https://charts.example.com",
    "repositoryName": "r",
    "chartName": "r/c",
    "chartVersion": "1.0.0",
    "releaseName": "c",
    "releaseNamespace": "c",
}


@pytest.mark.parametrize(
    ("extra", "refused"),
    [
        ({"reloader": True}, r"spec\.reloader: not supported"),
        (
            {"policyRefs": [{"kind": "ConfigMap", "name": "greeting", "namespace": "fw", "path": "x"}]},
            r"spec\.policyRefs\[0\]\.path: only meaningful for Flux sources",
        ),
        (
            {"policyRefs": [{"kind": "ConfigMap", "name": "greeting", "namespace": "fw", "force": False}]},
            r"spec\.policyRefs\[0\]\.force: false is not supported",
        ),
        (
            {
                "policyRefs": [
                    {
                        "kind": "ConfigMap",
                        "name": "greeting",
                        "namespace": "fw",
                        "skipNamespaceCreation": False,
                    }
                ]
            },
            r"spec\.policyRefs\[0\]\.skipNamespaceCreation: false is not supported",
        ),
        (
            {"helmCharts": [{**CHART, "registryCredentialsConfig": {"plainHTTP": True}}]},
            r"spec\.helmCharts\[0\]\.registryCredentialsConfig\.plainHTTP: repositoryURL is https://",
        ),
        (
            {"helmCharts": [{**CHART, "options": {"upgradeOptions": {"recreate": True}}}]},
            r"spec\.helmCharts\[0\]\.options\.upgradeOptions\.recreate: not supported",
        ),
    ],
)
def test_fields_fleetwave_would_otherwise_ignore_are_refused_by_name(
    extra: dict[str, Any], refused: str
) -> None:
    with pytest.raises(content.ContentError, match=refused):
        content.resolve(
            _spec(**extra),
            Objects({("ConfigMap", "fw", "greeting"): _policy("v1")}),
            default_namespace="fw",
            path="spec",
        )


def test_defaults_written_out_are_accepted() -> None:
    spec = _spec(tier=100, continueOnError=False, reloader=False, driftExclusions=[])
    resolved = content.resolve(
        spec, Objects({("ConfigMap", "fw", "greeting"): _policy("v1")}), default_namespace="fw", path="spec"
    )
    assert resolved.body["policies"]


def _profile_spec(**extra: Any) -> ClusterProfileSpec:
    return ClusterProfileSpec.model_validate(
        {"policyRefs": [{"kind": "ConfigMap", "name": "greeting", "namespace": "fw"}], **extra}
    )


def test_extra_labels_and_annotations_are_stamped_on_every_delivered_object_and_change_the_hash() -> None:
    objects = Objects({("ConfigMap", "fw", "greeting"): _policy("v1")})
    plain = content.resolve(_profile_spec(), objects, default_namespace="fw", path="spec")
    extra = content.resolve(
        _profile_spec(extraLabels={"team": "platform"}, extraAnnotations={"example.com/owner": "ops"}),
        objects,
        default_namespace="fw",
        path="spec",
    )
    meta = extra.body["policies"][0]["objects"][0]["metadata"]
    assert meta["labels"] == {"team": "platform"}
    assert meta["annotations"] == {"example.com/owner": "ops"}
    assert "labels" not in plain.body["policies"][0]["objects"][0]["metadata"]
    assert extra.hash != plain.hash  # a new revision delivers them


@pytest.mark.parametrize(
    ("extra", "refused"),
    [
        ({"extraLabels": {"bad key!": "x"}}, r"spec\.extraLabels: key 'bad key!' is not a valid"),
        ({"extraLabels": {"ok": "not valid!"}}, r"spec\.extraLabels\[ok\]: not a valid label value"),
        ({"extraLabels": {"ok": "x" * 64}}, r"spec\.extraLabels\[ok\]: not a valid label value"),
        ({"extraAnnotations": {"UPPER.example.com/x": "v"}}, r"spec\.extraAnnotations: key"),
        (
            {
                "extraLabels": {"team": "a"},
                "helmCharts": [
                    {
                        "repositoryURL": "https://charts.example.com",
                        "repositoryName": "r",
                        "chartName": "r/c",
                        "chartVersion": "1.0.0",
                        "releaseName": "c",
                        "releaseNamespace": "c",
                    }
                ],
            },
            r"spec\.extraLabels: not supported together with helmCharts",
        ),
    ],
)
def test_extras_kubernetes_would_refuse_or_fleetwave_cannot_apply_everywhere_are_refused_by_name(
    extra: dict[str, Any], refused: str
) -> None:
    with pytest.raises(content.ContentError, match=refused):
        content.resolve(
            _profile_spec(**extra),
            Objects({("ConfigMap", "fw", "greeting"): _policy("v1")}),
            default_namespace="fw",
            path="spec",
        )


def _deployment_policy() -> dict[str, Any]:
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": 3, "template": {"spec": {"containers": [{"name": "w", "image": "nginx:1"}]}}},
    }
    other = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"}}
    return {"data": {"a.yaml": yaml.safe_dump_all([deployment, other])}}


def test_drift_exclusions_remove_the_paths_from_matching_objects_before_delivery() -> None:
    spec = _spec(
        driftExclusions=[
            {
                "paths": ["/spec/replicas", "/spec/template/spec/containers/0/image"],
                "target": {"kind": "Deployment"},
            },
            {"paths": ["/data/absent"]},  # no target: every object; an absent path is no error
        ]
    )
    resolved = content.resolve(
        spec,
        Objects({("ConfigMap", "fw", "greeting"): _deployment_policy()}),
        default_namespace="fw",
        path="spec",
    )
    deployment, config = resolved.body["policies"][0]["objects"]
    assert "replicas" not in deployment["spec"]
    assert deployment["spec"]["template"]["spec"]["containers"] == [{"name": "w"}]
    assert config["metadata"] == {"name": "c", "namespace": "default"}


@pytest.mark.parametrize(
    ("exclusion", "refused"),
    [
        ({"paths": ["spec/replicas"]}, r"driftExclusions\[0\]\.paths\[0\]: not a JSON pointer"),
        ({"paths": ["/x"], "target": {"labelSelector": "app=web"}}, r"target\.labelSelector: not supported"),
        ({"paths": ["/x"], "target": {"name": "web-.*"}}, r"target\.name: only a literal name"),
    ],
)
def test_drift_exclusions_fleetwave_cannot_apply_are_refused_by_name(
    exclusion: dict[str, Any], refused: str
) -> None:
    with pytest.raises(content.ContentError, match=refused):
        content.resolve(
            _spec(driftExclusions=[exclusion]),
            Objects({("ConfigMap", "fw", "greeting"): _policy("v1")}),
            default_namespace="fw",
            path="spec",
        )


def test_local_content_is_marked_for_the_management_cluster_and_may_not_hold_fleetwaves_own_kinds() -> None:
    local = ProfileSpec.model_validate(
        {
            "policyRefs": [
                {"kind": "ConfigMap", "name": "greeting", "namespace": "fw", "deploymentType": "Local"}
            ]
        }
    )
    found = Objects({("ConfigMap", "fw", "greeting"): _policy("v1")})
    resolved = content.resolve(local, found, default_namespace="fw", path="spec")
    assert resolved.body["policies"][0]["deploymentType"] == "Local"
    remote = content.resolve(_spec(), found, default_namespace="fw", path="spec")
    assert "deploymentType" not in remote.body["policies"][0]  # unchanged hashes for remote content
    profile = {
        "apiVersion": "config.projectsveltos.io/v1beta1",
        "kind": "ClusterProfile",
        "metadata": {"name": "everywhere"},
        "spec": {"clusterSelector": {"matchLabels": {}}},
    }
    own = Objects({("ConfigMap", "fw", "greeting"): {"data": {"a.yaml": yaml.safe_dump(profile)}}})
    with pytest.raises(
        content.ContentError, match=r"policyRefs\[0\]\.deploymentType: Local content may not hold"
    ):
        content.resolve(local, own, default_namespace="fw", path="spec")

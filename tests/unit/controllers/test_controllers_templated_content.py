"""Templates, kustomizationRefs and patches: what a revision pins and what each cluster gets (ADR 0089).

The management cluster is a dictionary of objects (the controller reads its informer cache, not the
API, here); the Go templates and kustomize are the real pinned binaries.
"""

from __future__ import annotations

import asyncio
import base64
import io
import tarfile
from collections.abc import Mapping
from typing import Any

import pytest
import yaml

from fleetwave.api.sveltos import ClusterProfileSpec
from fleetwave.controllers.fleet.boundary import Boundary
from fleetwave.controllers.sveltos import content, templated_content
from fleetwave.delivery.gotemplate import Renderer
from fleetwave.delivery.kustomize import Kustomizer
from fleetwave.local import binaries

ADDON = "addons.projectsveltos.io/cluster-profile"


class Objects:
    def __init__(self, objects: dict[tuple[str, str, str], dict[str, Any]]) -> None:
        self.objects = objects

    def get(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        return self.objects.get((kind, namespace, name))


@pytest.fixture(scope="module")
def tools() -> templated_content.Tools:
    found = binaries.ensure()
    return templated_content.Tools(
        Renderer(found.path("fleetwave-render")), Kustomizer(found.path("kustomize"))
    )


def cluster(name: str, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "fleetwave.io/v1alpha1",
        "kind": "MemberCluster",
        "metadata": {"name": name, "namespace": "fleet", "labels": labels, "uid": "u-" + name},
    }


def cm(name: str, data: dict[str, str], namespace: str = "fw", template: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if template:
        meta["annotations"] = {content.TEMPLATE_ANNOTATION: "ok"}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


def secret(name: str, data: dict[str, str], namespace: str = "fw", template: bool = False) -> dict[str, Any]:
    obj = cm(name, {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}, namespace, template)
    return {**obj, "kind": "Secret", "type": ADDON}


TEMPLATED_POLICY = """
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: apps
data:
  cluster: {{ .Cluster.metadata.name }}
  region: {{ .Cluster.metadata.labels.region }}
  replicas: "{{ (getResource "sizes").data.replicas }}"
"""


def spec(**fields: Any) -> ClusterProfileSpec:
    return ClusterProfileSpec.model_validate(fields)


def resolve(s: ClusterProfileSpec, objects: Objects) -> content.Resolved:
    boundary = Boundary(controller_namespace="fleetwave-system")
    return content.resolve(s, objects, default_namespace="fw", path="spec", boundary=boundary)


def for_cluster(
    body: Mapping[str, Any], c: Mapping[str, Any], objects: Objects, tools: templated_content.Tools
) -> dict[str, Any]:
    boundary = Boundary(controller_namespace="fleetwave-system")
    return asyncio.run(
        templated_content.instantiate(body, cluster=c, lookup=objects, boundary=boundary, tools=tools)
    )


def objects_of(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [o for p in body["policies"] for o in p["objects"]]


SIZES = cm("sizes", {"replicas": "3"})
PROFILE = spec(
    policyRefs=[{"kind": "ConfigMap", "name": "app", "namespace": "fw"}],
    templateResourceRefs=[
        {
            "resource": {"apiVersion": "v1", "kind": "ConfigMap", "name": "sizes", "namespace": "fw"},
            "identifier": "sizes",
        }
    ],
)


def test_a_template_policy_is_pinned_raw_and_renders_differently_per_cluster(
    tools: templated_content.Tools,
) -> None:
    objects = Objects(
        {
            ("ConfigMap", "fw", "app"): cm("app", {"a.yaml": TEMPLATED_POLICY}, template=True),
            ("ConfigMap", "fw", "sizes"): SIZES,
        }
    )
    resolved = resolve(PROFILE, objects)
    assert resolved.body["policies"][0]["templates"][0]["text"] == TEMPLATED_POLICY
    assert resolved.body["mgmtResources"]["sizes"]["data"] == {"replicas": "3"}
    eu = objects_of(for_cluster(resolved.body, cluster("eu-1", region="eu"), objects, tools))
    us = objects_of(for_cluster(resolved.body, cluster("us-1", region="us"), objects, tools))
    assert eu[0]["data"] == {"cluster": "eu-1", "region": "eu", "replicas": "3"}
    assert us[0]["data"] == {"cluster": "us-1", "region": "us", "replicas": "3"}


def test_a_pinned_template_resource_is_part_of_the_revision_so_an_edit_walks_the_stages_again() -> None:
    app = cm("app", {"a.yaml": TEMPLATED_POLICY}, template=True)
    before = resolve(PROFILE, Objects({("ConfigMap", "fw", "app"): app, ("ConfigMap", "fw", "sizes"): SIZES}))
    after = resolve(
        PROFILE,
        Objects(
            {("ConfigMap", "fw", "app"): app, ("ConfigMap", "fw", "sizes"): cm("sizes", {"replicas": "5"})}
        ),
    )
    assert before.hash != after.hash


def test_a_source_without_the_template_annotation_is_plain_content_even_with_braces(
    tools: templated_content.Tools,
) -> None:
    literal = (
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, namespace: a}\n"
        "data: {t: '{{ not rendered }}'}\n"
    )
    objects = Objects({("ConfigMap", "fw", "app"): cm("app", {"a.yaml": literal})})
    body = resolve(spec(policyRefs=[{"kind": "ConfigMap", "name": "app", "namespace": "fw"}]), objects).body
    assert not templated_content.needs_instantiation(body)
    assert objects_of(for_cluster(body, cluster("c"), objects, tools))[0]["data"] == {
        "t": "{{ not rendered }}"
    }


def test_a_broken_template_is_this_clusters_error_naming_the_source_and_go_message(
    tools: templated_content.Tools,
) -> None:
    objects = Objects(
        {
            ("ConfigMap", "fw", "app"): cm("app", {"a.yaml": TEMPLATED_POLICY}, template=True),
            ("ConfigMap", "fw", "sizes"): SIZES,
        }
    )
    body = resolve(PROFILE, objects).body
    with pytest.raises(templated_content.InstantiationError) as info:
        for_cluster(body, cluster("no-region"), objects, tools)
    assert "spec.policyRefs[0][a.yaml]" in str(info.value)
    assert 'map has no entry for key "region"' in str(info.value)


def test_a_template_read_from_a_secret_fails_without_quoting_it(tools: templated_content.Tools) -> None:
    text = 'token: {{ "s3cr3t-value" | required .Cluster.metadata.labels.nope }}'
    objects = Objects({("Secret", "fw", "app"): secret("app", {"a.yaml": text}, template=True)})
    body = resolve(spec(policyRefs=[{"kind": "Secret", "name": "app", "namespace": "fw"}]), objects).body
    with pytest.raises(templated_content.InstantiationError) as info:
        for_cluster(body, cluster("c"), objects, tools)
    assert "s3cr3t" not in str(info.value)
    assert "the template fails at line 1" in str(info.value)


def test_helm_values_are_rendered_per_cluster_then_merged_in_order(tools: templated_content.Tools) -> None:
    chart = {
        "repositoryURL": "http://127.0.0.1/",
        "repositoryName": "r",
        "chartName": "r/c",
        "chartVersion": "1",
        "releaseName": "c",
        "releaseNamespace": "c",
        "values": "cluster: {{ .Cluster.metadata.name }}\nreplicas: 1\n",
        "valuesFrom": [{"kind": "ConfigMap", "name": "more"}, {"kind": "ConfigMap", "name": "static"}],
    }
    objects = Objects(
        {
            ("ConfigMap", "fw", "more"): cm(
                "more", {"v": "replicas: {{ len .Cluster.metadata.name }}\n"}, template=True
            ),
            ("ConfigMap", "fw", "static"): cm("static", {"v": "image: nginx\n"}),
        }
    )
    body = resolve(spec(helmCharts=[chart]), objects).body
    assert "valueLayers" in body["helmCharts"][0]
    out = for_cluster(body, cluster("abcd"), objects, tools)
    assert out["helmCharts"][0]["values"] == {"cluster": "abcd", "replicas": 4, "image": "nginx"}


def test_per_cluster_template_resources_read_the_clusters_namespace_and_a_templated_name(
    tools: templated_content.Tools,
) -> None:
    policy = (
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, namespace: a}\n"
        'data:\n  tier: {{ (getResource "own").data.tier }}\n'
    )
    objects = Objects(
        {
            ("ConfigMap", "fw", "app"): cm("app", {"a.yaml": policy}, template=True),
            ("ConfigMap", "fleet", "eu-1-settings"): cm("eu-1-settings", {"tier": "gold"}, namespace="fleet"),
        }
    )
    profile = spec(
        policyRefs=[{"kind": "ConfigMap", "name": "app", "namespace": "fw"}],
        templateResourceRefs=[
            {
                "resource": {"kind": "ConfigMap", "name": "{{ .Cluster.metadata.name }}-settings"},
                "identifier": "own",
            }
        ],
    )
    body = resolve(profile, objects).body
    assert body["mgmtResources"] == {}
    assert body["templateResourceRefs"][0]["name"] == "{{ .Cluster.metadata.name }}-settings"
    assert objects_of(for_cluster(body, cluster("eu-1"), objects, tools))[0]["data"] == {"tier": "gold"}
    with pytest.raises(
        templated_content.InstantiationError, match=r"ConfigMap fleet/us-1-settings not found"
    ):
        for_cluster(body, cluster("us-1"), objects, tools)


def test_template_resources_stay_inside_the_content_boundary(tools: templated_content.Tools) -> None:
    kubeconfig = {**secret("member-kubeconfig", {"k": "x"}, namespace="fleet"), "type": "Opaque"}
    kubeconfig["metadata"]["labels"] = {content.MEMBER_SECRET_LABEL: "c"}
    objects = Objects(
        {
            ("ConfigMap", "fw", "app"): cm("app", {"a.yaml": TEMPLATED_POLICY}, template=True),
            ("Secret", "fleet", "c-kubeconfig"): kubeconfig,
        }
    )
    own = spec(
        policyRefs=[{"kind": "ConfigMap", "name": "app", "namespace": "fw"}],
        templateResourceRefs=[
            {"resource": {"kind": "Secret", "name": "x", "namespace": "fleetwave-system"}, "identifier": "x"}
        ],
    )
    with pytest.raises(content.ContentError, match="fleetwave's own namespace is never a content source"):
        resolve(own, objects)
    stolen = spec(
        policyRefs=[{"kind": "ConfigMap", "name": "app", "namespace": "fw"}],
        templateResourceRefs=[
            {
                "resource": {"kind": "Secret", "name": "{{ .Cluster.metadata.name }}-kubeconfig"},
                "identifier": "x",
            }
        ],
    )
    body = resolve(stolen, objects).body
    with pytest.raises(
        templated_content.InstantiationError, match="member cluster's kubeconfig, never content"
    ):
        for_cluster(body, cluster("c"), objects, tools)
    other = spec(
        policyRefs=[{"kind": "ConfigMap", "name": "app", "namespace": "fw"}],
        templateResourceRefs=[
            {"resource": {"kind": "Node", "name": "n", "namespace": "fw"}, "identifier": "x"}
        ],
    )
    with pytest.raises(content.ContentError, match="Node is not supported"):
        resolve(other, objects)


def test_an_optional_template_resource_that_is_missing_is_left_out(tools: templated_content.Tools) -> None:
    text = (
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, namespace: a}\n"
        "data: {n: '{{ len .MgmtResources }}'}\n"
    )
    objects = Objects({("ConfigMap", "fw", "app"): cm("app", {"a.yaml": text}, template=True)})
    absent = {"resource": {"kind": "ConfigMap", "name": "gone", "namespace": "fw"}, "identifier": "g"}
    with pytest.raises(content.ContentError, match="ConfigMap fw/gone not found"):
        resolve(
            spec(
                policyRefs=[{"kind": "ConfigMap", "name": "app", "namespace": "fw"}],
                templateResourceRefs=[absent],
            ),
            objects,
        )
    profile = spec(
        policyRefs=[{"kind": "ConfigMap", "name": "app", "namespace": "fw"}],
        templateResourceRefs=[{**absent, "optional": True}],
    )
    assert objects_of(for_cluster(resolve(profile, objects).body, cluster("c"), objects, tools))[0][
        "data"
    ] == {"n": "0"}


@pytest.mark.parametrize("field", ["watchFields", "ignoreStatusChanges"])
def test_template_resource_trigger_options_are_refused_by_name(field: str) -> None:
    value: Any = ["data"] if field == "watchFields" else True
    profile = spec(
        templateResourceRefs=[
            {
                "resource": {"kind": "ConfigMap", "name": "s", "namespace": "fw"},
                "identifier": "s",
                field: value,
            }
        ]
    )
    with pytest.raises(content.ContentError, match=rf"templateResourceRefs\[0\]\.{field}: not supported"):
        resolve(profile, Objects({("ConfigMap", "fw", "s"): SIZES}))


def tgz(files: dict[str, str]) -> str:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, text in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(text.encode())
            tar.addfile(info, io.BytesIO(text.encode()))
    return base64.b64encode(buf.getvalue()).decode()


TREE = {
    "base/kustomization.yaml": "resources: [deploy.yaml]\n",
    "base/deploy.yaml": (
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n"
        "spec:\n  replicas: 1\n  template:\n    metadata: {labels: {region: '{{ .Region }}'}}\n"
    ),
    "overlays/prod/kustomization.yaml": "resources: [../../base]\nnamePrefix: prod-\n",
    "components/scaled/kustomization.yaml": (
        "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\n"
        "patches:\n- patch: |\n    - op: replace\n      path: /spec/replicas\n      value: 3\n"
        "  target: {kind: Deployment}\n"
    ),
}


def test_a_kustomization_ref_builds_the_overlay_and_fills_its_values_per_cluster(
    tools: templated_content.Tools,
) -> None:
    source = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "kz", "namespace": "fw"},
        "binaryData": {content.KUSTOMIZE_ARCHIVE_KEY: tgz(TREE)},
    }
    objects = Objects(
        {
            ("ConfigMap", "fw", "kz"): source,
            ("ConfigMap", "fw", "kz-values"): cm("kz-values", {"Team": "core"}),
        }
    )
    profile = spec(
        kustomizationRefs=[
            {
                "kind": "ConfigMap",
                "name": "kz",
                "namespace": "fw",
                "path": "./overlays/prod/",
                "components": ["../../components/scaled"],
                "targetNamespace": "eng",
                "tier": 50,
                "values": {
                    "Region": "{{ .Cluster.metadata.labels.region }}-{{ len .Cluster.metadata.name }}"
                },
                "valuesFrom": [{"kind": "ConfigMap", "name": "kz-values"}],
            },
            {"kind": "ConfigMap", "name": "absent", "namespace": "fw", "optional": True},
        ]
    )
    resolved = resolve(profile, objects)
    assert "archive" in resolved.body["policies"][0]["kustomize"]
    assert len(resolved.body["policies"]) == 1  # the optional, absent source is skipped
    assert resolved.body["policies"][0]["tier"] == 50
    assert resolved.body["policies"][0]["values"]["Team"] == "core"
    out = for_cluster(resolved.body, cluster("c", region="eu"), objects, tools)
    (deploy,) = objects_of(out)
    assert deploy["metadata"] == {"name": "prod-web", "namespace": "eng"}
    assert deploy["spec"]["replicas"] == 3  # the component
    assert deploy["spec"]["template"]["metadata"]["labels"] == {"region": "eu-1"}
    assert out["policies"][0]["feature"] == "Kustomize"


def test_a_kustomization_source_without_the_archive_names_the_key() -> None:
    objects = Objects({("ConfigMap", "fw", "kz"): cm("kz", {"x": "y"})})
    profile = spec(kustomizationRefs=[{"kind": "ConfigMap", "name": "kz", "namespace": "fw"}])
    with pytest.raises(content.ContentError, match=r"has no binaryData\[kustomize.tar.gz\]"):
        resolve(profile, objects)


def test_patches_apply_to_every_delivered_object_and_may_be_templates(tools: templated_content.Tools) -> None:
    deploy = (
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: a}\nspec: {replicas: 1}\n"
    )
    objects = Objects(
        {
            ("ConfigMap", "fw", "app"): cm("app", {"d.yaml": deploy}),
            ("ConfigMap", "fw", "more-patches"): cm(
                "more-patches",
                {
                    "p": "patch: |\n  - op: replace\n    path: /spec/replicas\n    value: 5\n"
                    "target: {kind: Deployment}\n"
                },
            ),
        }
    )
    profile = spec(
        policyRefs=[{"kind": "ConfigMap", "name": "app", "namespace": "fw"}],
        patches=[
            {
                "patch": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: a\n"
                "  labels: {cluster: '{{ .Cluster.metadata.name }}'}\n",
            }
        ],
        patchesFrom=[{"kind": "ConfigMap", "name": "more-patches", "namespace": "fw"}],
    )
    body = resolve(profile, objects).body
    (web,) = objects_of(for_cluster(body, cluster("dev-7"), objects, tools))
    assert web["metadata"]["labels"] == {"cluster": "dev-7"}
    assert web["spec"]["replicas"] == 5
    assert "annotations" not in web["metadata"]  # the regrouping marker is gone


def test_patches_reach_each_chart_rendered_for_the_cluster(tools: templated_content.Tools) -> None:
    """With helmCharts, the patches (rendered per cluster) travel with each chart to helm's
    post-renderer (ADR 0105); the chart's values are left alone."""
    chart = {
        "repositoryURL": "http://x/",
        "repositoryName": "r",
        "chartName": "r/c",
        "releaseName": "c",
        "releaseNamespace": "c",
        "values": "replicas: 2\n",
    }
    objects = Objects(
        {("ConfigMap", "fw", "more"): cm("more", {"p": 'patch: \'[{"op": "remove", "path": "/x"}]\'\n'})}
    )
    profile = spec(
        helmCharts=[chart, {**chart, "releaseName": "d"}],
        patches=[
            {
                "patch": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: c\n"
                "  labels: {cluster: '{{ .Cluster.metadata.name }}'}\n",
                "target": {"kind": "Deployment"},
            }
        ],
        patchesFrom=[{"kind": "ConfigMap", "name": "more", "namespace": "fw"}],
    )
    body = for_cluster(resolve(profile, objects).body, cluster("dev-7"), objects, tools)
    assert [c["chart"]["releaseName"] for c in body["helmCharts"]] == ["c", "d"]
    for entry in body["helmCharts"]:
        assert entry["values"] == {"replicas": 2}
        first, second = entry["patches"]
        assert "cluster: 'dev-7'" in first["patch"]
        assert first["target"] == {"kind": "Deployment"}
        assert second == {"patch": '[{"op": "remove", "path": "/x"}]'}


def test_extra_labels_reach_rendered_objects_as_they_reach_static_ones(
    tools: templated_content.Tools,
) -> None:
    objects = Objects(
        {
            ("ConfigMap", "fw", "app"): cm("app", {"a.yaml": TEMPLATED_POLICY}, template=True),
            ("ConfigMap", "fw", "sizes"): SIZES,
        }
    )
    profile = spec(**PROFILE.model_dump(by_alias=True, exclude_none=True), extraLabels={"team": "core"})
    (obj,) = objects_of(
        for_cluster(resolve(profile, objects).body, cluster("c", region="eu"), objects, tools)
    )
    assert obj["metadata"]["labels"] == {"team": "core"}


def test_nothing_templated_passes_through_unchanged(tools: templated_content.Tools) -> None:
    body = {
        "policies": [{"source": "ConfigMap/fw/a", "tier": 100, "objects": [{"kind": "X"}]}],
        "helmCharts": [],
    }
    assert for_cluster(body, cluster("c"), Objects({}), tools) == body
    assert yaml.safe_dump(body)  # still plain data

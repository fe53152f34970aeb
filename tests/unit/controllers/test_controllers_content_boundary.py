"""Content sources follow the boundary (ADR 0046): which namespaces, which Secrets, which kinds a
profile may read, how Secret content is pinned, and that no refusal quotes Secret data."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

import pytest
import yaml

from fleetwave.api.sveltos import PolicyRef, ProfileSpec
from fleetwave.controllers.fleet import members as fleet_members
from fleetwave.controllers.fleet.boundary import Boundary
from fleetwave.controllers.sveltos import content

CONTROLLER_NS = "fleetwave-system"
SECRET_VALUE = "s3cr3t-t0ken-value"


class Objects:
    """A Lookup that records every read."""

    def __init__(self, objects: dict[tuple[str, str, str], dict[str, Any]]) -> None:
        self.objects = objects
        self.reads: list[tuple[str, str, str]] = []

    def get(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        self.reads.append((kind, namespace, name))
        return self.objects.get((kind, namespace, name))


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _manifest(message: str) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "greeting", "namespace": "default"},
            "data": {"message": message},
        }
    )


def _configmap(message: str = "hi") -> dict[str, Any]:
    return {"metadata": {"name": "c"}, "data": {"a.yaml": _manifest(message)}}


def _secret(text: str, *, type_: str = content.ADDON_SECRET_TYPE, labels: Any = None) -> dict[str, Any]:
    return {"metadata": {"name": "s", "labels": labels or {}}, "type": type_, "data": {"a.yaml": _b64(text)}}


def _spec(*refs: dict[str, Any]) -> ProfileSpec:
    return ProfileSpec.model_validate({"policyRefs": list(refs)})


BOUNDARY = Boundary(controller_namespace=CONTROLLER_NS)


def _resolve(spec: ProfileSpec, objects: Objects, boundary: Boundary = BOUNDARY) -> content.Resolved:
    return content.resolve(spec, objects, default_namespace=CONTROLLER_NS, path="spec", boundary=boundary)


def test_a_cluster_scoped_profile_reads_configmaps_and_addon_secrets_in_other_namespaces() -> None:
    objects = Objects(
        {
            ("ConfigMap", "team-a", "c"): _configmap(),
            ("Secret", "team-b", "s"): _secret(_manifest("from a secret")),
        }
    )
    resolved = _resolve(
        _spec(
            {"kind": "ConfigMap", "namespace": "team-a", "name": "c"},
            {"kind": "Secret", "namespace": "team-b", "name": "s"},
        ),
        objects,
    )
    assert [p["source"] for p in resolved.body["policies"]] == ["ConfigMap/team-a/c", "Secret/team-b/s"]
    assert resolved.from_secret


@pytest.mark.parametrize("kind", ["ConfigMap", "Secret"])
def test_fleetwave_s_own_namespace_is_never_read(kind: str) -> None:
    objects = Objects({(kind, CONTROLLER_NS, "x"): _configmap() if kind == "ConfigMap" else _secret("")})
    with pytest.raises(content.ContentError, match="fleetwave's own namespace is never a content source"):
        _resolve(_spec({"kind": kind, "namespace": CONTROLLER_NS, "name": "x"}), objects)
    assert objects.reads == []  # refused before anything is read


def test_an_empty_namespace_of_a_cluster_scoped_profile_must_be_set() -> None:
    objects = Objects({("ConfigMap", CONTROLLER_NS, "x"): _configmap()})
    with pytest.raises(content.ContentError, match=r"spec\.policyRefs\[0\]\.namespace: required"):
        _resolve(_spec({"kind": "ConfigMap", "name": "x"}), objects)
    assert objects.reads == []


def test_a_namespaced_profile_reads_only_its_own_namespace() -> None:
    boundary = Boundary(controller_namespace=CONTROLLER_NS, own_namespace="team-a")
    objects = Objects(
        {("ConfigMap", "team-a", "c"): _configmap(), ("ConfigMap", "team-b", "c"): _configmap()}
    )
    # Empty namespace: its own (Sveltos: "the Profile namespace will be used").
    resolved = _resolve(_spec({"kind": "ConfigMap", "name": "c"}), objects, boundary)
    assert resolved.body["policies"][0]["source"] == "ConfigMap/team-a/c"
    with pytest.raises(content.ContentError, match=r"reads only its own namespace \(team-a\)"):
        _resolve(_spec({"kind": "ConfigMap", "namespace": "team-b", "name": "c"}), objects, boundary)
    assert ("ConfigMap", "team-b", "c") not in objects.reads


def test_a_namespace_the_controller_does_not_watch_is_refused_by_name_not_reported_missing() -> None:
    boundary = Boundary(controller_namespace=CONTROLLER_NS, watched=frozenset({"team-a", CONTROLLER_NS}))
    objects = Objects(
        {("ConfigMap", "team-a", "c"): _configmap(), ("Secret", "team-b", "s"): _secret(_manifest("x"))}
    )
    resolved = _resolve(_spec({"kind": "ConfigMap", "namespace": "team-a", "name": "c"}), objects, boundary)
    assert resolved.body["policies"][0]["source"] == "ConfigMap/team-a/c"
    with pytest.raises(content.ContentError) as refused:
        _resolve(_spec({"kind": "Secret", "namespace": "team-b", "name": "s"}), objects, boundary)
    assert str(refused.value) == (
        "spec.policyRefs[0]: Secret team-b/s: namespace team-b is not watched by this controller "
        "(it watches fleetwave-system, team-a; see --watch-namespace)"
    )
    assert ("Secret", "team-b", "s") not in objects.reads


@pytest.mark.parametrize("type_", ["Opaque", "kubernetes.io/service-account-token", "kubernetes.io/tls"])
def test_a_secret_is_content_only_when_its_type_says_so(type_: str) -> None:
    objects = Objects({("Secret", "team", "s"): _secret(_manifest(SECRET_VALUE), type_=type_)})
    with pytest.raises(content.ContentError) as err:
        _resolve(_spec({"kind": "Secret", "namespace": "team", "name": "s"}), objects)
    assert f"has type {type_}; only Secrets of type {content.ADDON_SECRET_TYPE} are content" in str(err.value)
    assert SECRET_VALUE not in str(err.value)


def test_a_secret_without_a_type_counts_as_opaque() -> None:
    secret = _secret(_manifest("x"))
    del secret["type"]
    with pytest.raises(content.ContentError, match="has type Opaque"):
        _resolve(
            _spec({"kind": "Secret", "namespace": "team", "name": "s"}),
            Objects({("Secret", "team", "s"): secret}),
        )


def test_a_labelled_member_kubeconfig_is_never_content_whatever_its_type() -> None:
    secret = _secret("apiVersion: v1\nkind: Config\n", labels={content.MEMBER_SECRET_LABEL: "m1"})
    with pytest.raises(content.ContentError, match="is a member cluster's kubeconfig, never content"):
        _resolve(
            _spec({"kind": "Secret", "namespace": "team", "name": "s"}),
            Objects({("Secret", "team", "s"): secret}),
        )


def test_a_secret_a_membercluster_references_is_never_read_as_content() -> None:
    members = [
        {"metadata": {"name": "m1", "namespace": "team"}, "spec": {"kubeconfigSecretRef": {"name": "s"}}},
        {"metadata": {"name": "m2", "namespace": "other"}, "spec": {}},
    ]
    refs = fleet_members.kubeconfig_secrets(members)
    assert refs == {("team", "s"), ("other", "m2-kubeconfig")}
    boundary = Boundary(controller_namespace=CONTROLLER_NS, kubeconfig_secrets=refs)
    objects = Objects({("Secret", "team", "s"): _secret("x")})  # addon-typed, unlabelled
    spec = ProfileSpec.model_validate(
        {
            "helmCharts": [
                {
                    "repositoryURL": "https://charts.example/",
                    "repositoryName": "r",
                    "chartName": "r/c",
                    "chartVersion": "1",
                    "releaseName": "c",
                    "releaseNamespace": "c",
                    "valuesFrom": [{"kind": "Secret", "namespace": "team", "name": "s"}],
                }
            ]
        }
    )
    with pytest.raises(content.ContentError, match=r"valuesFrom\[0\]: Secret team/s is a member cluster's"):
        _resolve(spec, objects, boundary)
    assert objects.reads == []


def test_a_fleetwave_snapshot_is_not_a_source_even_outside_fleetwave_s_namespace() -> None:
    resolved = content.Resolved(hash="a" * 64, body={"policies": [], "helmCharts": []})
    copy = content.snapshot_configmap(resolved, "team")
    with pytest.raises(content.ContentError, match="is a fleetwave content snapshot, not a source"):
        _resolve(
            _spec({"kind": "ConfigMap", "namespace": "team", "name": "c"}),
            Objects({("ConfigMap", "team", "c"): copy}),
        )


@pytest.mark.parametrize("kind", ["GitRepository", "OCIRepository", "Bucket"])
def test_flux_kinds_are_refused_by_name_without_a_lookup_unless_flux_sources_are_read(kind: str) -> None:
    objects = Objects({})
    with pytest.raises(
        content.ContentError, match=rf"spec\.policyRefs\[0\]\.kind: {kind} is a Flux source.*--flux-sources"
    ):
        _resolve(_spec({"kind": kind, "namespace": "flux-system", "name": "repo", "path": "x"}), objects)
    assert objects.reads == []  # there is no informer for these kinds: a lookup used to be a KeyError


def test_a_remote_url_is_refused_by_name() -> None:
    with pytest.raises(content.ContentError, match=r"spec\.policyRefs\[0\]\.remoteURL: .*not supported"):
        _resolve(_spec({"remoteURL": {"url": "https://example.com/x.yaml"}}), Objects({}))


def test_check_refs_refuses_what_it_can_without_reading() -> None:
    refs = [
        PolicyRef.model_validate({"kind": "ConfigMap", "namespace": "team", "name": "ok"}),
        PolicyRef.model_validate({"kind": "Bucket", "namespace": "team", "name": "b"}),
    ]
    with pytest.raises(content.ContentError, match=r"pre\[1\]\.kind: Bucket is a Flux source"):
        content.check_refs(refs, default_namespace=CONTROLLER_NS, path="pre", boundary=BOUNDARY)
    own = [PolicyRef.model_validate({"kind": "ConfigMap", "namespace": CONTROLLER_NS, "name": "x"})]
    with pytest.raises(content.ContentError, match="own namespace"):
        content.check_refs(own, default_namespace=CONTROLLER_NS, path="pre", boundary=BOUNDARY)


def test_content_from_a_secret_is_pinned_into_a_secret_and_configmap_content_into_a_configmap() -> None:
    objects = Objects(
        {
            ("ConfigMap", "team", "c"): _configmap(),
            ("Secret", "team", "s"): _secret(_manifest(SECRET_VALUE)),
        }
    )
    plain = _resolve(_spec({"kind": "ConfigMap", "namespace": "team", "name": "c"}), objects)
    secret = _resolve(_spec({"kind": "Secret", "namespace": "team", "name": "s"}), objects)

    assert not plain.from_secret
    assert plain.snapshot_kind == "ConfigMap"
    assert content.snapshot_object(plain, CONTROLLER_NS)["kind"] == "ConfigMap"

    assert secret.snapshot_kind == "Secret"
    assert secret.snapshot_name.startswith(content.SECRET_SNAPSHOT_PREFIX)
    assert content.snapshot_kind(secret.snapshot_name) == "Secret"
    assert content.snapshot_kind(plain.snapshot_name) == "ConfigMap"
    pinned = content.snapshot_object(secret, CONTROLLER_NS)
    assert pinned["kind"] == "Secret"
    assert pinned["immutable"] is True
    assert pinned["type"] == content.SNAPSHOT_SECRET_TYPE
    assert SECRET_VALUE not in str(pinned)  # base64 in data, as any Secret
    assert content.load_snapshot(pinned, "Secret") == secret.body

    lookup = Objects({("Secret", CONTROLLER_NS, secret.snapshot_name): pinned})
    assert content.read_snapshot(lookup, CONTROLLER_NS, secret.snapshot_name) == secret.body
    assert content.read_snapshot(lookup, CONTROLLER_NS, plain.snapshot_name) is None
    with pytest.raises(content.ContentError, match="not a fleetwave content snapshot"):
        content.read_snapshot(lookup, CONTROLLER_NS, "some-configmap")


def test_helm_values_from_a_secret_make_the_snapshot_a_secret() -> None:
    spec = ProfileSpec.model_validate(
        {
            "helmCharts": [
                {
                    "repositoryURL": "https://charts.example/",
                    "repositoryName": "r",
                    "chartName": "r/c",
                    "chartVersion": "1",
                    "releaseName": "c",
                    "releaseNamespace": "c",
                    "valuesFrom": [{"kind": "Secret", "namespace": "team", "name": "s"}],
                }
            ]
        }
    )
    objects = Objects({("Secret", "team", "s"): _secret(f"password: {SECRET_VALUE}\n")})
    resolved = _resolve(spec, objects)
    assert resolved.body["helmCharts"][0]["values"] == {"password": SECRET_VALUE}
    assert resolved.from_secret


@pytest.mark.parametrize(
    "text",
    [
        f"password: {SECRET_VALUE}\n  bad: [indent",
        f"a: *{SECRET_VALUE}\n",  # an undefined alias: PyYAML's message would quote its name
        f"a: !{SECRET_VALUE} x\n",  # an unknown tag: the loader's message would quote it
        f"- {SECRET_VALUE}\n",  # not a mapping
    ],
)
def test_yaml_errors_in_secret_values_never_quote_the_secret(text: str) -> None:
    spec = ProfileSpec.model_validate(
        {
            "helmCharts": [
                {
                    "repositoryURL": "https://charts.example/",
                    "repositoryName": "r",
                    "chartName": "r/c",
                    "chartVersion": "1",
                    "releaseName": "c",
                    "releaseNamespace": "c",
                    "valuesFrom": [{"kind": "Secret", "namespace": "team", "name": "s"}],
                }
            ]
        }
    )
    with pytest.raises(content.ContentError) as err:
        _resolve(spec, Objects({("Secret", "team", "s"): _secret(text)}))
    assert str(err.value).startswith(r"spec.helmCharts[0].valuesFrom[0][a.yaml]: ")
    assert SECRET_VALUE not in str(err.value)


@pytest.mark.parametrize(
    "text",
    [
        f"apiVersion: v1\nkind: {SECRET_VALUE}\n",  # no metadata.name: the kind is not quoted
        f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: x}}\ndata: {{k: {SECRET_VALUE}\n",
        f"apiVersion: v1\nkind: ConfigMap\nmetadata: *{SECRET_VALUE}\n",
    ],
)
def test_bad_policy_data_in_a_secret_never_quotes_it(text: str) -> None:
    with pytest.raises(content.ContentError) as err:
        _resolve(
            _spec({"kind": "Secret", "namespace": "team", "name": "s"}),
            Objects({("Secret", "team", "s"): _secret(text)}),
        )
    assert SECRET_VALUE not in str(err.value)
    assert "spec.policyRefs[0][a.yaml]" in str(err.value)


def test_secret_data_that_is_not_base64_is_refused_by_key() -> None:
    secret = _secret("x")
    secret["data"] = {"values": "%%%"}
    spec = ProfileSpec.model_validate(
        {
            "helmCharts": [
                {
                    "repositoryURL": "https://charts.example/",
                    "repositoryName": "r",
                    "chartName": "r/c",
                    "chartVersion": "1",
                    "releaseName": "c",
                    "releaseNamespace": "c",
                    "valuesFrom": [{"kind": "Secret", "namespace": "team", "name": "s"}],
                }
            ]
        }
    )
    with pytest.raises(content.ContentError, match=r"valuesFrom\[0\]\[values\]: not base64"):
        _resolve(spec, Objects({("Secret", "team", "s"): secret}))


def test_inline_helm_values_go_through_the_bounded_loader() -> None:
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
        for p, c in zip("abcdefgh", "bcdefghi", strict=True)
    )
    spec = ProfileSpec.model_validate(
        {
            "helmCharts": [
                {
                    "repositoryURL": "https://charts.example/",
                    "repositoryName": "r",
                    "chartName": "r/c",
                    "chartVersion": "1",
                    "releaseName": "c",
                    "releaseNamespace": "c",
                    "values": bomb,
                }
            ]
        }
    )
    with pytest.raises(
        content.ContentError, match=r"spec\.helmCharts\[0\]\.values: not valid YAML .*expands"
    ):
        _resolve(spec, Objects({}))  # refused by counting, before anything is expanded


def test_a_cluster_api_clusters_kubeconfig_is_never_read_as_content() -> None:
    """`<name>-kubeconfig` of a Cluster API Cluster (ADR 0109) is a credential even when its type is
    the add-on one (whoever could write it so could not make it content): refused unread."""
    cluster = {"metadata": {"name": "c1", "namespace": "dev"}, "spec": {}}
    refs = fleet_members.kubeconfig_secrets([], [cluster])
    assert refs == {("dev", "c1-kubeconfig")}
    boundary = Boundary(controller_namespace=CONTROLLER_NS, kubeconfig_secrets=refs)
    objects = Objects({("Secret", "dev", "c1-kubeconfig"): _secret("x")})
    with pytest.raises(
        content.ContentError, match=r"Secret dev/c1-kubeconfig is a member cluster's kubeconfig"
    ):
        _resolve(_spec({"kind": "Secret", "namespace": "dev", "name": "c1-kubeconfig"}), objects, boundary)
    assert objects.reads == []

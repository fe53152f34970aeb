"""A chart's registryCredentialsConfig within the content boundary (ADR 0105): what resolving a
revision refuses without reading, and what each delivery reads (the informer cache is a dict here)."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleetwave.api.codec import parse_object
from fleetwave.api.sveltos import ClusterProfile, ClusterProfileSpec, HelmChart
from fleetwave.controllers.fleet.boundary import Boundary
from fleetwave.controllers.sveltos import content, registry_credentials
from fleetwave.delivery import registry
from fleetwave.delivery.registry import RegistryError

PASSWORD = "pw-never-shown-0451"
BOUNDARY = Boundary(
    controller_namespace="fleetwave-system", kubeconfig_secrets=frozenset({("fleet", "member-1-kubeconfig")})
)


class Cache:
    def __init__(self, *objects: dict[str, Any]) -> None:
        self.objects = {(o["metadata"]["namespace"], o["metadata"]["name"]): o for o in objects}

    def get(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        assert kind == "Secret"
        return self.objects.get((namespace, name))


def _chart(config: dict[str, Any], url: str = "oci://r.example:5000/charts") -> HelmChart:
    return HelmChart.model_validate(
        {
            "repositoryURL": url,
            "chartName": "web",
            "chartVersion": "1.0.0",
            "releaseName": "web",
            "releaseNamespace": "apps",
            "registryCredentialsConfig": config,
        }
    )


def _secret(name: str, namespace: str, type_: str, data: dict[str, str], **meta: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": namespace, **meta},
        "type": type_,
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
    }


DOCKER = _secret(
    "pull",
    "team",
    registry.DOCKER_CONFIG_TYPE,
    {
        ".dockerconfigjson": json.dumps(
            {"auths": {"r.example:5000": {"username": "robot", "password": PASSWORD}}}
        )
    },
)


@pytest.mark.parametrize(
    ("ref", "refused"),
    [
        ({"name": "pull"}, r"credentials\.namespace: required"),
        (
            {"name": "x", "namespace": "fleetwave-system"},
            "fleetwave's own namespace is never a content source",
        ),
        ({"name": "member-1-kubeconfig", "namespace": "fleet"}, "is a member cluster's kubeconfig"),
    ],
)
def test_a_reference_outside_the_boundary_is_refused_when_the_revision_is_resolved(
    ref: dict[str, str], refused: str
) -> None:
    spec = ClusterProfileSpec.model_validate(
        {"helmCharts": [_chart({"credentials": ref}).model_dump(by_alias=True)]}
    )
    with pytest.raises(content.ContentError, match=refused) as err:
        content.resolve(spec, Cache(), default_namespace="fw", path="spec", boundary=BOUNDARY)
    assert str(err.value).startswith("spec.helmCharts[0].registryCredentialsConfig.credentials")


def test_the_revision_pins_the_reference_and_reads_no_secret() -> None:
    chart = _chart({"credentials": {"name": "pull", "namespace": "team"}})
    spec = ClusterProfileSpec.model_validate(
        {"helmCharts": [chart.model_dump(by_alias=True, exclude_none=True)]}
    )
    resolved = content.resolve(spec, Cache(), default_namespace="fw", path="spec", boundary=BOUNDARY)
    (entry,) = resolved.body["helmCharts"]
    assert entry["chart"]["registryCredentialsConfig"] == {
        "credentials": {"name": "pull", "namespace": "team"}
    }
    assert resolved.from_secret is False  # nothing of a Secret is in the snapshot
    assert PASSWORD not in json.dumps(resolved.body)


def test_at_delivery_the_secret_is_read_and_held_to_the_rules_again() -> None:
    chart = _chart({"credentials": {"name": "pull", "namespace": "team"}})
    found = registry_credentials.access(chart, Cache(DOCKER), BOUNDARY)
    assert found is not None
    assert (found.username, found.password, found.url) == ("robot", PASSWORD, chart.repository_url)
    with pytest.raises(
        RegistryError, match=r"registryCredentialsConfig\.credentials: Secret team/pull not found"
    ):
        registry_credentials.access(chart, Cache(), BOUNDARY)
    # A Secret labelled as a member's kubeconfig, or a snapshot, is never read as credentials.
    for labels, refused in (
        ({"fleetwave.io/member-cluster": "m"}, "kubeconfig"),
        ({"fleetwave.io/content": "snapshot"}, "content snapshot"),
    ):
        labelled = {**DOCKER, "metadata": {**DOCKER["metadata"], "labels": labels}}
        with pytest.raises(RegistryError, match=refused):
            registry_credentials.access(chart, Cache(labelled), BOUNDARY)
    # Watching only some namespaces (--watch-namespace): the others are refused, not read.
    watched = Boundary(controller_namespace="fleetwave-system", watched=frozenset({"apps"}))
    with pytest.raises(RegistryError, match="team"):
        registry_credentials.access(chart, Cache(DOCKER), watched)


def test_an_opaque_secret_is_refused_at_delivery_naming_the_rule() -> None:
    opaque = _secret("basic", "team", "Opaque", {"username": "u", "password": PASSWORD})
    chart = _chart({"credentials": {"name": "basic", "namespace": "team"}})
    with pytest.raises(RegistryError) as err:
        registry_credentials.access(chart, Cache(opaque), BOUNDARY)
    assert str(err.value) == (
        "registryCredentialsConfig.credentials: Secret team/basic has type Opaque; registry credentials are "
        "read only from Secrets of type kubernetes.io/dockerconfigjson or kubernetes.io/basic-auth"
    )


def test_the_ca_comes_from_any_secret_type_inside_the_boundary() -> None:
    pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    ca = _secret("ca", "team", "kubernetes.io/tls", {"ca.crt": pem, "tls.key": PASSWORD})
    found = registry_credentials.access(
        _chart({"ca": {"name": "ca", "namespace": "team"}}), Cache(ca), BOUNDARY
    )
    assert found is not None
    assert (found.ca_pem, found.has_credentials) == (pem.encode(), False)
    with pytest.raises(RegistryError, match="key: only meaningful with credentials"):
        registry_credentials.check(_chart({"key": "x"}), BOUNDARY, "spec")


def test_the_example_resolves_and_its_basic_auth_secret_is_bound_to_its_host() -> None:
    """examples/profile-private-charts.yaml: the profile resolves (references pinned, nothing read),
    and its basic-auth Secret is usable for its repository only."""
    path = Path(__file__).resolve().parents[3] / "examples" / "profile-private-charts.yaml"
    secret, profile = (d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d)
    parsed = parse_object(profile)
    assert isinstance(parsed, ClusterProfile)
    resolved = content.resolve(parsed.spec, Cache(), default_namespace="fw", path="spec", boundary=BOUNDARY)
    assert [c["chart"]["releaseName"] for c in resolved.body["helmCharts"]] == ["web", "tools"]
    stored = {
        **secret,
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in secret["stringData"].items()},
    }
    tools = HelmChart.model_validate(resolved.body["helmCharts"][1]["chart"])
    found = registry_credentials.access(tools, Cache(stored), BOUNDARY)
    assert found is not None
    assert (found.username, found.named_repository) == ("reader", True)
    web = HelmChart.model_validate(
        {**resolved.body["helmCharts"][1]["chart"], "repositoryURL": "https://elsewhere.example.com/stable"}
    )
    with pytest.raises(RegistryError, match=r"is not for elsewhere\.example\.com"):
        registry_credentials.access(web, Cache(stored), BOUNDARY)


def test_the_configs_key_and_flags_become_the_access_helm_is_given() -> None:
    """`key` picks the docker config's key in the Secret; `insecureSkipTLSVerify` and `plainHTTP`
    reach the Access helm's flags are made from (tests/unit/delivery: each flag reaches helm)."""
    moved = {**DOCKER, "data": {"config.json": DOCKER["data"][".dockerconfigjson"]}}
    keyed = _chart({"credentials": {"name": "pull", "namespace": "team"}, "key": "config.json"})
    found = registry_credentials.access(keyed, Cache(moved), BOUNDARY)
    assert found is not None
    assert (found.username, found.password) == ("robot", PASSWORD)
    assert (found.insecure, found.plain_http) == (False, False)
    without_key = _chart({"credentials": {"name": "pull", "namespace": "team"}})
    with pytest.raises(RegistryError, match=r"has no key \.dockerconfigjson"):
        registry_credentials.access(without_key, Cache(moved), BOUNDARY)

    insecure = registry_credentials.access(_chart({"insecureSkipTLSVerify": True}), Cache(), BOUNDARY)
    assert insecure is not None
    assert (insecure.insecure, insecure.plain_http) == (True, False)
    plain = registry_credentials.access(_chart({"plainHTTP": True}), Cache(), BOUNDARY)
    assert plain is not None
    assert (plain.insecure, plain.plain_http) == (False, True)

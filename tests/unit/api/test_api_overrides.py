"""ClusterResourceOverride / ResourceOverride models and CRDs: what upstream's webhook refuses is
refused, by the CRD's CEL rules and by the same checks in Python."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import celpy
import pytest
import yaml
from pydantic import ValidationError

from fleetwave.api import codec, crds
from fleetwave.api.models import KINDS
from fleetwave.api.overrides import ClusterResourceOverride, JSONPatchOverride, OverrideRule, ResourceOverride

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "placement-overrides.yaml"
PROD = {"clusterSelectorTerms": [{"labelSelector": {"matchLabels": {"env": "prod"}}}]}


def _cro(rule: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "placement.kubernetes-fleet.io/v1beta1",
        "kind": "ClusterResourceOverride",
        "metadata": {"name": "o"},
        "spec": {
            "clusterResourceSelectors": [{"group": "", "version": "v1", "kind": "Namespace", "name": "app"}],
            "policy": {"overrideRules": [rule]},
            **spec,
        },
    }


def _rules_of(kind: str, model: str) -> list[str]:
    schema = crds.crd_for(KINDS[kind])["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    node = schema["properties"]["spec"]["properties"]["policy"]["properties"]["overrideRules"]["items"]
    if model == "patch":
        node = node["properties"]["jsonPatchOverrides"]["items"]
    return [r["rule"] for r in node["x-kubernetes-validations"]]


def _cel_ok(rules: list[str], value: dict[str, Any]) -> bool:
    env = celpy.Environment()
    return all(bool(env.program(env.compile(r)).evaluate({"self": celpy.json_to_cel(value)})) for r in rules)


def test_the_upstream_form_parses_with_defaults() -> None:
    parsed = codec.parse_object(
        _cro(
            {
                "clusterSelector": PROD,
                "jsonPatchOverrides": [{"op": "add", "path": "/metadata/labels/a", "value": "b"}],
            }
        )
    )
    assert isinstance(parsed, ClusterResourceOverride)
    rule = parsed.spec.policy.override_rules[0]
    assert rule.override_type == "JSONPatch"
    assert rule.json_patch_overrides is not None
    assert rule.json_patch_overrides[0].value == "b"


@pytest.mark.parametrize(
    ("patch", "why"),
    [
        ({"op": "replace", "path": "/kind", "value": "Secret"}, "kind, apiVersion or status"),
        ({"op": "add", "path": "/apiVersion", "value": "v2"}, "kind, apiVersion or status"),
        ({"op": "add", "path": "/status/x", "value": 1}, "kind, apiVersion or status"),
        ({"op": "replace", "path": "/metadata/name", "value": "x"}, "except labels and annotations"),
        ({"op": "add", "path": "/metadata", "value": {}}, "except labels and annotations"),
        ({"op": "add", "path": "spec/x", "value": 1}, "must start with /"),
        ({"op": "add", "path": "/spec//x", "value": 1}, "empty segment"),
        ({"op": "remove", "path": "/spec/x", "value": 1}, "remove cannot have a value"),
    ],
)
def test_paths_and_values_upstream_refuses_are_refused_by_python_and_cel(
    patch: dict[str, Any], why: str
) -> None:
    with pytest.raises(ValidationError, match=why):
        JSONPatchOverride.model_validate(patch)
    if "value" not in why:  # the API server's CEL cannot see `value` (no schema): Python's only
        assert not _cel_ok(_rules_of("ClusterResourceOverride", "patch"), patch)


@pytest.mark.parametrize(
    "patch",
    [
        {"op": "add", "path": "/metadata/labels/cluster-name", "value": "${MEMBER-CLUSTER-NAME}"},
        {"op": "replace", "path": "/metadata/annotations", "value": {"a": "b"}},
        {"op": "remove", "path": "/spec/replicas"},
        {"op": "replace", "path": "/data/kind", "value": ["any", "json", 1]},
    ],
)
def test_allowed_patches_pass_both(patch: dict[str, Any]) -> None:
    JSONPatchOverride.model_validate(patch)
    assert _cel_ok(_rules_of("ClusterResourceOverride", "patch"), patch)


@pytest.mark.parametrize(
    ("rule", "why"),
    [
        ({"overrideType": "Delete", "jsonPatchOverrides": [{"op": "remove", "path": "/a"}]}, "not allowed"),
        ({"overrideType": "JSONPatch"}, "required"),
        (
            {
                "overrideType": "Delete",
                "clusterSelector": {"clusterSelectorTerms": [{"propertySelector": {"matchExpressions": []}}]},
            },
            "only labelSelector",
        ),
    ],
)
def test_rules_upstream_refuses_are_refused_by_python_and_cel(rule: dict[str, Any], why: str) -> None:
    with pytest.raises(ValidationError, match=why):
        OverrideRule.model_validate(rule)
    assert not _cel_ok(_rules_of("ResourceOverride", "rule"), rule)


def test_a_cluster_override_cannot_reference_a_namespaced_placement_and_selectors_are_unique() -> None:
    delete = {"overrideType": "Delete", "clusterSelector": PROD}
    with pytest.raises(codec.ManifestError, match="Namespaced placement"):
        codec.parse_object(_cro(delete, placement={"name": "rp", "scope": "Namespaced"}))
    twice = _cro(delete)
    twice["spec"]["clusterResourceSelectors"] *= 2
    with pytest.raises(codec.ManifestError, match="selectors must be unique"):
        codec.parse_object(twice)
    root = crds.crd_for(KINDS["ClusterResourceOverride"])["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert "Namespaced" in root["x-kubernetes-validations"][0]["rule"]


def test_lists_are_bounded_as_upstream() -> None:
    spec = crds.crd_for(KINDS["ResourceOverride"])["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    props = spec["properties"]["spec"]["properties"]
    assert (props["resourceSelectors"]["minItems"], props["resourceSelectors"]["maxItems"]) == (1, 20)
    rules = props["policy"]["properties"]["overrideRules"]
    assert rules["maxItems"] == 20
    assert rules["items"]["properties"]["jsonPatchOverrides"]["maxItems"] == 20
    value = rules["items"]["properties"]["jsonPatchOverrides"]["items"]["properties"]["value"]
    assert value["x-kubernetes-preserve-unknown-fields"] is True
    assert set(value) == {"x-kubernetes-preserve-unknown-fields", "description"}  # any JSON value: no type


def test_the_example_parses_and_uses_the_member_cluster_name_variable() -> None:
    docs = [d for d in yaml.safe_load_all(EXAMPLE.read_text(encoding="utf-8")) if d]
    parsed = [codec.parse_object(d) for d in docs]
    kinds = [type(p).__name__ for p in parsed]
    assert kinds == ["ClusterResourcePlacement", "ClusterResourceOverride", "ResourceOverride"]
    assert "${MEMBER-CLUSTER-NAME}" in EXAMPLE.read_text(encoding="utf-8")
    assert isinstance(parsed[2], ResourceOverride)
    assert parsed[2].metadata.namespace == "app"

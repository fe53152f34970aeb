"""Envelopes (ADR 0092): what one may wrap, how a placement selects it, what a member gets."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest
import yaml

from fleetwave.api.codec import parse_object
from fleetwave.api.kubefleet import PlacementSpec
from fleetwave.api.models import ClusterResourcePlacement
from fleetwave.controllers.kubefleet import envelopes, selection

API = "placement.kubernetes-fleet.io/v1beta1"
WEBHOOK = {
    "apiVersion": "admissionregistration.k8s.io/v1",
    "kind": "ValidatingWebhookConfiguration",
    "metadata": {"name": "guard"},
    "webhooks": [],
}
CONFIG = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {"name": "cfg", "namespace": "app"},
    "data": {"a": "b"},
}


def envelope(kind: str, data: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "env"}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": API, "kind": kind, "metadata": meta, "data": data}


def test_a_member_gets_what_an_envelope_wraps_instead_of_the_envelope() -> None:
    objects = [
        CONFIG,
        envelope(
            "ClusterResourceEnvelope", {"b.yaml": WEBHOOK, "a.yaml": {**WEBHOOK, "metadata": {"name": "a"}}}
        ),
    ]
    assert [o["metadata"]["name"] for o in envelopes.unwrap(objects)] == ["cfg", "a", "guard"]
    assert envelopes.wrapped_kinds(objects) == {
        ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration")
    }


@pytest.mark.parametrize(
    ("wrapped", "why"),
    [
        (
            envelope("ClusterResourceEnvelope", {"c": CONFIG}),
            "a namespaced object cannot be wrapped in a ClusterResourceEnvelope",
        ),
        (envelope("ResourceEnvelope", {"w": WEBHOOK}, "app"), "a cluster-scoped object"),
        (
            envelope(
                "ResourceEnvelope", {"c": {**CONFIG, "metadata": {"name": "x", "namespace": "other"}}}, "app"
            ),
            "of namespace other cannot be wrapped",
        ),
        (envelope("ClusterResourceEnvelope", {"x": {"kind": "ConfigMap"}}), "not a Kubernetes object"),
        (
            envelope(
                "ClusterResourceEnvelope", {"x": {"apiVersion": "v1", "kind": "Namespace", "metadata": {}}}
            ),
            "without metadata.name",
        ),
        (
            envelope("ClusterResourceEnvelope", {"e": envelope("ClusterResourceEnvelope", {"w": WEBHOOK})}),
            "cannot be wrapped",
        ),
        (
            envelope(
                "ClusterResourceEnvelope",
                {
                    "p": {
                        "apiVersion": "fleetwave.io/v1alpha1",
                        "kind": "ClusterProfile",
                        "metadata": {"name": "p"},
                    }
                },
            ),
            "cannot be wrapped",
        ),
        (envelope("ClusterResourceEnvelope", {}), "at least one manifest"),
    ],
)
def test_a_wrong_envelope_is_refused_naming_it_and_the_entry(wrapped: dict[str, Any], why: str) -> None:
    with pytest.raises(envelopes.EnvelopeError, match=why):
        envelopes.check(wrapped)


def test_a_placement_selects_envelopes_in_either_group_and_refuses_a_wrong_one() -> None:
    hub = {
        "Namespace": [{"metadata": {"name": "app"}}],
        "ResourceEnvelope": [
            {**envelope("ResourceEnvelope", {"c": CONFIG}, "app"), "apiVersion": "fleetwave.io/v1alpha1"}
        ],
        "ClusterResourceEnvelope": [
            {**envelope("ClusterResourceEnvelope", {"w": WEBHOOK}), "apiVersion": "fleetwave.io/v1alpha1"}
        ],
    }
    spec = PlacementSpec.model_validate(
        {
            "resourceSelectors": [
                {"group": "", "version": "v1", "kind": "Namespace", "name": "app"},
                {
                    "group": "placement.kubernetes-fleet.io",
                    "version": "v1beta1",
                    "kind": "ClusterResourceEnvelope",
                    "name": "env",
                },
            ]
        }
    )
    extra = selection.envelope_kinds("fleetwave.io/v1alpha1")
    picked = selection.select(spec, lambda k: hub.get(k, []), namespace=None, extra=extra)
    assert [(o["kind"], o["metadata"]["name"]) for o in picked] == [
        ("Namespace", "app"),
        ("ClusterResourceEnvelope", "env"),
        ("ResourceEnvelope", "env"),
    ]
    hub["ClusterResourceEnvelope"][0]["data"] = {"c": CONFIG}
    with pytest.raises(
        selection.SelectionError, match=r"spec\.resourceSelectors: ClusterResourceEnvelope env \[c\]"
    ):
        selection.select(spec, lambda k: hub.get(k, []), namespace=None, extra=extra)


def test_the_envelopes_example_gives_members_the_wrapped_objects() -> None:
    path = pathlib.Path(__file__).resolve().parents[3] / "examples" / "placement-envelopes.yaml"
    docs = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]
    parsed = [parse_object(d) for d in docs]
    [placement] = [p for p in parsed if isinstance(p, ClusterResourcePlacement)]
    hub: dict[str, list[dict[str, Any]]] = {"Namespace": [{"metadata": {"name": "app"}}]}
    for d in docs:
        if d["kind"] != "ClusterResourcePlacement":
            hub.setdefault(d["kind"], []).append(d)
    picked = selection.select(
        placement.spec, lambda k: hub.get(k, []), namespace=None, extra=selection.envelope_kinds(API)
    )
    members_get = envelopes.unwrap(picked)
    assert sorted((o["kind"], o["metadata"]["name"]) for o in members_get) == [
        ("ConfigMap", "app-settings"),
        ("Namespace", "app"),
        ("ValidatingWebhookConfiguration", "admission-guard"),
    ]

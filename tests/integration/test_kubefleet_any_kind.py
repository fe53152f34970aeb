"""A placement carries any kind the controller is told to place (ADR 0091), as KubeFleet users place
CRDs with their custom resources: a ClusterResourcePlacement selects a CustomResourceDefinition by
name and a namespace whose content includes custom resources and an Ingress; every member gets the CRD
first, then what lives in the namespace; deleting the placement withdraws all of it. And envelopes
(ADR 0092): content that must not act on the hub (a webhook configuration) reaches members wrapped."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
from lightkube import ApiError, Client, codecs
from promotion_support import ControllerThread, registered_controller, wait_for

from fleetwave.kube import kinds
from fleetwave.local import binaries, fleet
from fleetwave.mgmt import install, placement_kinds, rbac

GROUP = f"kinds-{uuid.uuid4().hex[:6]}.example.com"
PLURAL = "widgets"
CRD_NAME = f"{PLURAL}.{GROUP}"
API = f"{kinds.GROUP}/{kinds.VERSION}"


def _crd() -> dict[str, Any]:
    schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": CRD_NAME},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"plural": PLURAL, "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": schema},
                    "subresources": {"status": {}},
                }
            ],
        },
    }


def _established(client: Client) -> bool:
    crd = client.get(kinds.builtin_resource("apiextensions.k8s.io/v1", "CustomResourceDefinition"), CRD_NAME)
    return any(c.type == "Established" and c.status == "True" for c in (crd.status.conditions or []))


def _found(client: Client, api_version: str, kind: str, name: str, namespace: str | None) -> Any | None:
    plural = {
        "Widget": PLURAL,
        "Ingress": "ingresses",
        "CustomResourceDefinition": "customresourcedefinitions",
        "ValidatingWebhookConfiguration": "validatingwebhookconfigurations",
        "ConfigMap": "configmaps",
    }
    resource = kinds.resource_class(
        kinds.KindInfo(kinds.GVK(api_version, kind), plural[kind], namespace is not None)
    )
    try:
        return client.get(resource, name, namespace=namespace)
    except ApiError as e:
        if e.status.code == 404:
            return None
        raise
    except httpx2.HTTPStatusError as e:  # the kind itself is not served (yet): a bare 404
        if e.response.status_code == 404:
            return None
        raise


def _available(management: Client, name: str) -> dict[str, Any] | None:
    status = dict(management.get(kinds.resource("ClusterResourcePlacement"), name).status or {})
    conditions = status.get("conditions") or []
    ok = any(c["type"] == "ClusterResourcePlacementAvailable" and c["status"] == "True" for c in conditions)
    return status if ok else None


@pytest.fixture(scope="module")
def controller(
    local_fleet: fleet.FleetState, management: Client, bins: binaries.Binaries
) -> Iterator[ControllerThread]:
    management.apply(codecs.from_dict(_crd()), field_manager="test")
    wait_for(lambda: _established(management), what="the Widget CRD on the management cluster")
    kinds.served_resource(f"{GROUP}/v1", "Widget", PLURAL, True)  # so that codecs can read a Widget
    extra = placement_kinds.resolve(
        management,
        [
            "apiextensions.k8s.io/v1/CustomResourceDefinition",
            f"{GROUP}/v1/Widget",
            "networking.k8s.io/v1/Ingress",
        ],
    )
    # The controller runs with the installed RBAC: read rights on the kinds it is told to place.
    install.install(management, placement_kinds=extra)
    try:
        with registered_controller(
            local_fleet, management, bins.path("helm"), "any-kind", placement_kinds=extra
        ) as thread:
            yield thread
    finally:
        management.delete(
            kinds.builtin_resource("apiextensions.k8s.io/v1", "CustomResourceDefinition"), CRD_NAME
        )
        # The read rights on the placed kinds are this module's: later modules check that the installed
        # RBAC grants nothing beyond what fleetwave's own install does.
        for kind in ("ClusterRoleBinding", "ClusterRole"):
            management.delete(
                kinds.builtin_resource("rbac.authorization.k8s.io/v1", kind), rbac.PLACEMENT_KINDS_NAME
            )


def test_a_placement_carries_a_crd_its_custom_resources_and_an_ingress_then_withdraws_them(
    controller: ControllerThread, management: Client, members: dict[str, Client], namespace: str
) -> None:
    widget = {
        "apiVersion": f"{GROUP}/v1",
        "kind": "Widget",
        "metadata": {"name": "blue", "namespace": namespace, "labels": {"colour": "blue"}},
        "spec": {"size": 3},
    }
    ingress = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"name": "web", "namespace": namespace},
        "spec": {"defaultBackend": {"service": {"name": "web", "port": {"number": 80}}}},
    }
    placement = {
        "apiVersion": API,
        "kind": "ClusterResourcePlacement",
        "metadata": {"name": f"widgets-{namespace}"},
        "spec": {
            "resourceSelectors": [
                {
                    "group": "apiextensions.k8s.io",
                    "version": "v1",
                    "kind": "CustomResourceDefinition",
                    "name": CRD_NAME,
                },
                {"group": "", "version": "v1", "kind": "Namespace", "name": namespace},
            ],
            "policy": {"placementType": "PickAll"},
        },
    }
    for doc in (widget, ingress, placement):
        management.apply(codecs.from_dict(doc), field_manager="test")
    name = placement["metadata"]["name"]
    try:
        for member, client in members.items():
            got = wait_for(
                lambda c=client: _found(c, f"{GROUP}/v1", "Widget", "blue", namespace),
                what=f"the Widget on {member}",
            )
            assert got["spec"] == {"size": 3}
            assert got["metadata"]["labels"]["colour"] == "blue"
            assert _found(client, "networking.k8s.io/v1", "Ingress", "web", namespace) is not None
            assert (
                _found(client, "apiextensions.k8s.io/v1", "CustomResourceDefinition", CRD_NAME, None)
                is not None
            )
        status = wait_for(lambda: _available(management, name), what="the placement available")
        selected = {(r["group"], r["kind"], r["name"]) for r in status["selectedResources"]}
        assert {
            ("apiextensions.k8s.io", "CustomResourceDefinition", CRD_NAME),
            (GROUP, "Widget", "blue"),
            ("networking.k8s.io", "Ingress", "web"),
        } <= selected
    finally:
        management.delete(kinds.resource("ClusterResourcePlacement"), name)
    for member, client in members.items():
        wait_for(
            lambda c=client: (
                _found(c, "apiextensions.k8s.io/v1", "CustomResourceDefinition", CRD_NAME, None) is None
                or None
            ),
            what=f"the CRD withdrawn from {member}",
        )
        assert _found(client, "networking.k8s.io/v1", "Ingress", "web", namespace) is None


def test_envelopes_carry_a_webhook_configuration_and_namespaced_content_that_never_act_on_the_hub(
    controller: ControllerThread, management: Client, members: dict[str, Client], namespace: str
) -> None:
    webhook_name = f"guard-{namespace}"
    webhook = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": webhook_name},
        "webhooks": [],
    }
    config = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "wrapped", "namespace": namespace},
        "data": {"from": "an envelope"},
    }
    cluster_envelope = {
        "apiVersion": API,
        "kind": "ClusterResourceEnvelope",
        "metadata": {"name": f"webhooks-{namespace}"},
        "data": {"webhook.yaml": webhook},
    }
    envelope = {
        "apiVersion": API,
        "kind": "ResourceEnvelope",
        "metadata": {"name": "config", "namespace": namespace},
        "data": {"config.yaml": config},
    }
    placement = {
        "apiVersion": API,
        "kind": "ClusterResourcePlacement",
        "metadata": {"name": f"envelopes-{namespace}"},
        "spec": {
            "resourceSelectors": [
                # As upstream's docs write them: the envelope kinds in KubeFleet's group.
                {
                    "group": "placement.kubernetes-fleet.io",
                    "version": "v1beta1",
                    "kind": "ClusterResourceEnvelope",
                    "name": cluster_envelope["metadata"]["name"],
                },
                {"group": "", "version": "v1", "kind": "Namespace", "name": namespace},
            ],
            "policy": {"placementType": "PickAll"},
        },
    }
    for doc in (cluster_envelope, envelope, placement):
        management.apply(codecs.from_dict(doc), field_manager="test")
    hooks = "admissionregistration.k8s.io/v1"
    name = placement["metadata"]["name"]
    try:
        for member, client in members.items():
            wait_for(
                lambda c=client: _found(c, hooks, "ValidatingWebhookConfiguration", webhook_name, None),
                what=f"the wrapped webhook configuration on {member}",
            )
            wrapped = wait_for(
                lambda c=client: _found(c, "v1", "ConfigMap", "wrapped", namespace),
                what=f"the wrapped ConfigMap on {member}",
            )
            assert wrapped["data"] == {"from": "an envelope"}
        # The hub holds the envelopes, never what they wrap.
        assert _found(management, hooks, "ValidatingWebhookConfiguration", webhook_name, None) is None
        assert _found(management, "v1", "ConfigMap", "wrapped", namespace) is None
        status = wait_for(lambda: _available(management, name), what="the envelope placement available")
        assert ("ClusterResourceEnvelope", cluster_envelope["metadata"]["name"]) in {
            (r["kind"], r["name"]) for r in status["selectedResources"]
        }
    finally:
        management.delete(kinds.resource("ClusterResourcePlacement"), name)
        management.delete(kinds.resource("ClusterResourceEnvelope"), cluster_envelope["metadata"]["name"])
    for member, client in members.items():
        wait_for(
            lambda c=client: (
                _found(c, hooks, "ValidatingWebhookConfiguration", webhook_name, None) is None or None
            ),
            what=f"the webhook configuration withdrawn from {member}",
        )

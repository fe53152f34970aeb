"""The local fleet behaves like real clusters: SSA, admission, workloads that progress."""

from __future__ import annotations

import time

import pytest
from lightkube import ApiError, Client, codecs
from lightkube.generic_resource import create_namespaced_resource
from lightkube.resources.apiextensions_v1 import CustomResourceDefinition
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.batch_v1 import Job
from lightkube.resources.core_v1 import ConfigMap

from fleetwave.kube import client as kubeclient


def _wait(predicate: object, *, timeout: float = 90.0, what: str) -> None:
    assert callable(predicate)
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.5)


def test_server_side_apply_reaches_every_member_under_fleetwaves_field_manager(
    members: dict[str, Client], namespace: str
) -> None:
    for name, client in members.items():
        configmap = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "greeting", "namespace": namespace},
            "data": {"cluster": name},
        }
        client.apply(codecs.from_dict(configmap), force=True)
    for name, client in members.items():
        cm = client.get(ConfigMap, "greeting", namespace=namespace)
        assert cm.data == {"cluster": name}
        managers = {m.manager for m in cm.metadata.managedFields or []}
        assert kubeclient.FIELD_MANAGER in managers


_WIDGET_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.test.fleetwave.io"},
    "spec": {
        "group": "test.fleetwave.io",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "properties": {
                                    "min": {"type": "integer"},
                                    "max": {"type": "integer"},
                                },
                                "x-kubernetes-validations": [
                                    {"rule": "self.min <= self.max", "message": "min must not exceed max"}
                                ],
                            }
                        },
                    }
                },
            }
        ],
    },
}


def test_crd_with_cel_rule_rejects_an_invalid_object(management: Client, namespace: str) -> None:
    management.apply(CustomResourceDefinition.from_dict(_WIDGET_CRD), force=True)

    def established() -> bool:
        crd = management.get(CustomResourceDefinition, "widgets.test.fleetwave.io")
        return any(c.type == "Established" and c.status == "True" for c in (crd.status.conditions or []))

    _wait(established, what="CRD Established")
    widget = create_namespaced_resource("test.fleetwave.io", "v1", "Widget", "widgets")
    good = widget(metadata={"name": "ok", "namespace": namespace}, spec={"min": 1, "max": 2})
    # The CRD was just established: its schema may take a moment to be served by every handler.
    _wait(lambda: _created(management, good), timeout=30, what="valid Widget accepted")
    bad = widget(metadata={"name": "bad", "namespace": namespace}, spec={"min": 3, "max": 2})
    with pytest.raises(ApiError) as err:
        management.create(bad)
    assert err.value.status.code == 422
    assert "min must not exceed max" in (err.value.status.message or "")


def _created(client: Client, obj: object) -> bool:
    try:
        client.create(obj)  # type: ignore[call-overload]
    except ApiError as e:
        if e.status.code == 404:  # resource not yet served
            return False
        raise
    return True


def test_deployment_becomes_available_and_job_completes_on_a_member(
    members: dict[str, Client], namespace: str
) -> None:
    client = next(iter(members.values()))
    client.apply(
        Deployment.from_dict(
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "web", "namespace": namespace},
                "spec": {
                    "replicas": 2,
                    "selector": {"matchLabels": {"app": "web"}},
                    "template": {
                        "metadata": {"labels": {"app": "web"}},
                        "spec": {"containers": [{"name": "web", "image": "registry.invalid/web:1"}]},
                    },
                },
            }
        ),
        force=True,
    )
    client.apply(
        Job.from_dict(
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"name": "once", "namespace": namespace},
                "spec": {
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [{"name": "once", "image": "registry.invalid/once:1"}],
                        }
                    }
                },
            }
        ),
        force=True,
    )

    def available() -> bool:
        d = client.get(Deployment, "web", namespace=namespace)
        conditions = d.status.conditions if d.status else None
        return (d.status.availableReplicas or 0) == 2 and any(
            c.type == "Available" and c.status == "True" for c in conditions or []
        )

    def complete() -> bool:
        j = client.get(Job, "once", namespace=namespace)
        return bool(j.status and j.status.succeeded == 1)

    _wait(available, what="Deployment web Available with 2 replicas")
    _wait(complete, what="Job once complete")

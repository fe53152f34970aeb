"""Local content never writes what the controller itself runs on (issue 40, finding 3)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from fleetwave.api.sveltos import ProfileSpec
from fleetwave.controllers.fleet import local_boundary
from fleetwave.controllers.fleet.boundary import Boundary
from fleetwave.controllers.sveltos import content

NS = "fleetwave-system"


def _obj(
    api_version: str, kind: str, name: str, namespace: str | None = None, **extra: Any
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": api_version, "kind": kind, "metadata": meta, **extra}


def _problem(obj: dict[str, Any], **kw: Any) -> str | None:
    return local_boundary.problem(obj, controller_namespace=NS, **kw)


@pytest.mark.parametrize(
    "obj",
    [
        # The reviewer's attack: the leader Lease, held for 68 years.
        _obj(
            "coordination.k8s.io/v1",
            "Lease",
            "fleetwave-leader",
            NS,
            spec={"leaseDurationSeconds": 2147483647},
        ),
        _obj("coordination.k8s.io/v1", "Lease", "any-lease", "elsewhere"),
        _obj("v1", "Event", "forged", "team-a"),
        _obj("events.k8s.io/v1", "Event", "forged", "team-a"),
        _obj("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "me-admin"),
        _obj("rbac.authorization.k8s.io/v1", "Role", "r", "team-a"),
        _obj("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "w"),
        _obj("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding", "b"),
        _obj("apiregistration.k8s.io/v1", "APIService", "v1.fleetwave.io"),
        _obj("flowcontrol.apiserver.k8s.io/v1", "FlowSchema", "starve"),
        _obj("apiextensions.k8s.io/v1", "CustomResourceDefinition", "clusterpromotions.fleetwave.io"),
        _obj("config.projectsveltos.io/v1beta1", "ClusterProfile", "everywhere"),
        _obj("v1", "ConfigMap", "in-our-namespace", NS),
        _obj("apps/v1", "Deployment", "sidecar", NS),
        _obj("v1", "Namespace", NS),
    ],
)
def test_what_the_controller_runs_on_is_refused(obj: dict[str, Any]) -> None:
    why = _problem(obj)
    assert why is not None
    assert "leaseDurationSeconds" not in why
    assert "2147483647" not in why


def test_a_member_kubeconfig_secret_is_refused_by_reference_or_by_label() -> None:
    secret = _obj("v1", "Secret", "prod-kubeconfig", "team-a")
    assert _problem(secret, kubeconfig_secrets={("team-a", "prod-kubeconfig")}) is not None
    labelled = _obj("v1", "Secret", "other", "team-b")
    labelled["metadata"]["labels"] = {local_boundary.MEMBER_SECRET_LABEL: "prod"}
    assert _problem(labelled) is not None


@pytest.mark.parametrize(
    "obj",
    [
        _obj("v1", "ConfigMap", "settings", "team-a"),
        _obj("apps/v1", "Deployment", "web", "team-a"),
        _obj("v1", "Namespace", "team-a"),
        _obj(
            "apiextensions.k8s.io/v1",
            "CustomResourceDefinition",
            "widgets.example.com",
            spec={"group": "example.com"},
        ),
        _obj("v1", "Secret", "app-credentials", "team-a"),
    ],
)
def test_ordinary_content_passes(obj: dict[str, Any]) -> None:
    assert _problem(obj) is None


def test_an_operator_allow_list_admits_only_the_kinds_it_names() -> None:
    allowed = {"ConfigMap", "apps/Deployment", "networking.k8s.io/*"}
    assert _problem(_obj("v1", "ConfigMap", "a", "team-a"), allowed_kinds=allowed) is None
    assert _problem(_obj("apps/v1", "Deployment", "a", "team-a"), allowed_kinds=allowed) is None
    assert _problem(_obj("networking.k8s.io/v1", "Ingress", "a", "team-a"), allowed_kinds=allowed) is None
    refused = _problem(_obj("apps/v1", "DaemonSet", "a", "team-a"), allowed_kinds=allowed)
    assert refused is not None
    assert "operator allows" in refused
    # The deny-list holds even for a kind the operator allowed.
    assert _problem(_obj("v1", "ConfigMap", "a", NS), allowed_kinds=allowed) is not None


class _Objects:
    def __init__(self, manifest: dict[str, Any]) -> None:
        self.manifest = manifest

    def get(self, kind: str, namespace: str, name: str) -> Any:
        return {"data": {"a.yaml": yaml.safe_dump(self.manifest)}} if name == "local" else None


def test_a_profile_whose_local_content_holds_the_leader_lease_is_refused_when_resolved() -> None:
    spec = ProfileSpec.model_validate(
        {
            "policyRefs": [
                {"kind": "ConfigMap", "name": "local", "namespace": "src", "deploymentType": "Local"}
            ]
        }
    )
    lease = _obj("coordination.k8s.io/v1", "Lease", "fleetwave-leader", NS, spec={"leaseDurationSeconds": 1})
    boundary = Boundary(controller_namespace=NS)
    with pytest.raises(
        content.ContentError, match=r"policyRefs\[0\]\.deploymentType: Local content may not hold Lease"
    ):
        content.resolve(spec, _Objects(lease), default_namespace=NS, path="spec", boundary=boundary)
    # The same object delivered to members (not Local) is the author's business there.
    remote = ProfileSpec.model_validate(
        {"policyRefs": [{"kind": "ConfigMap", "name": "local", "namespace": "src"}]}
    )
    content.resolve(remote, _Objects(lease), default_namespace=NS, path="spec", boundary=boundary)

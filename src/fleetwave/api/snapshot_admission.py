"""Snapshots are immutable and only fleetwave cuts them: a ValidatingAdmissionPolicy (ADR 0112).

A resource snapshot is what a placement delivers and an override snapshot what it changes per
cluster; both are found by their `kubernetes-fleet.io/` labels. KubeFleet's webhook refuses edits of
a snapshot and hand-made ones; without the same refusal, `kubectl edit` on a snapshot would change
what a run delivers, and a snapshot made by hand with a placement's labels would be delivered as
that placement's content. The policy, in both groups where the kinds are served:

- refuses any change of a snapshot's `spec`, whoever asks (the controller never changes one);
- refuses setting, changing or removing `kubernetes-fleet.io/` labels on a snapshot (creating one
  with them included) unless the caller is the controller's ServiceAccount or a cluster admin
  (`system:masters`, `kubeadm:cluster-admins`, as KubeFleet's guard rail allows: the controller may
  run under an admin kubeconfig, and an admin can change anything anyway).

Snapshot status and unlabelled snapshots are left alone: nothing reads an unlabelled snapshot.
"""

from __future__ import annotations

from typing import Any

from fleetwave.api.meta import GROUP

POLICY = "snapshots.fleetwave.io-immutable"
UPSTREAM_GROUP = "placement.kubernetes-fleet.io"
RESOURCES = (
    "clusterresourcesnapshots",
    "resourcesnapshots",
    "clusterresourceoverridesnapshots",
    "resourceoverridesnapshots",
)
LABEL_PREFIX = "kubernetes-fleet.io/"
ADMIN_GROUPS = ("system:masters", "kubeadm:cluster-admins")
# `fleetwave install`'s ServiceAccount in its default namespace (`mgmt.install`, the chart's default).
DEFAULT_CONTROLLER_USER = "system:serviceaccount:fleetwave-system:fleetwave-controller"

SPEC_UNCHANGED = (
    "request.operation != 'UPDATE' || "
    "(has(object.spec) ? has(oldObject.spec) && object.spec == oldObject.spec : !has(oldObject.spec))"
)
LABELS_UNCHANGED = (
    "variables.mayLabel || (size(variables.labels) == size(variables.oldLabels)"
    " && variables.labels.all(l, l in variables.oldLabels))"
)
SPEC_MESSAGE = (
    "the spec of a snapshot cannot be changed: a snapshot records what a placement selected (or an"
    " override said) at one moment; change the selected resources or the override instead"
)
LABELS_MESSAGE = (
    f"only the fleetwave controller sets {LABEL_PREFIX} labels on snapshots: a snapshot carrying a"
    " placement's labels would be delivered as that placement's content"
)


def _labels_of(obj: str) -> str:
    """CEL: the object's `kubernetes-fleet.io/` labels as `key=value` strings."""
    return (
        f"has({obj}.metadata.labels) ? {obj}.metadata.labels.filter(k, k.startsWith('{LABEL_PREFIX}'))"
        f".map(k, k + '=' + {obj}.metadata.labels[k]) : []"
    )


def _may_label(controller_user: str) -> str:
    groups = ", ".join(f"'{g}'" for g in ADMIN_GROUPS)
    admin = f"request.userInfo.groups.exists(g, g in [{groups}])"
    return f"request.userInfo.username == '{controller_user}' || {admin}"


def policy_spec(controller_user: str) -> dict[str, Any]:
    """The policy's spec; `controller_user`: the controller's identity, as the API server names it."""
    if "'" in controller_user or "\\" in controller_user:
        raise ValueError(f"not a Kubernetes user name: {controller_user!r}")
    return {
        "failurePolicy": "Fail",
        "matchConstraints": {
            "resourceRules": [
                {
                    "apiGroups": [GROUP, UPSTREAM_GROUP],
                    "apiVersions": ["*"],
                    "operations": ["CREATE", "UPDATE"],
                    "resources": list(RESOURCES),
                }
            ]
        },
        "variables": [
            {"name": "labels", "expression": _labels_of("object")},
            {
                "name": "oldLabels",
                "expression": f"request.operation == 'UPDATE' ? ({_labels_of('oldObject')}) : []",
            },
            {"name": "mayLabel", "expression": _may_label(controller_user)},
        ],
        "validations": [
            {"expression": SPEC_UNCHANGED, "message": SPEC_MESSAGE, "reason": "Forbidden"},
            {"expression": LABELS_UNCHANGED, "message": LABELS_MESSAGE, "reason": "Forbidden"},
        ],
    }


def policies(controller_user: str = DEFAULT_CONTROLLER_USER) -> list[dict[str, Any]]:
    """The ValidatingAdmissionPolicy and its binding."""
    api = "admissionregistration.k8s.io/v1"
    return [
        {
            "apiVersion": api,
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": POLICY},
            "spec": policy_spec(controller_user),
        },
        {
            "apiVersion": api,
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": POLICY},
            "spec": {"policyName": POLICY, "validationActions": ["Deny"]},
        },
    ]


def controller_user(namespace: str, service_account: str) -> str:
    return f"system:serviceaccount:{namespace}:{service_account}"

"""`fleetwave install`: CRDs and least-privilege RBAC into the management cluster."""

from __future__ import annotations

import time
from typing import Any

from fleetwave.api import crds
from fleetwave.kube import kinds, sync_ops
from fleetwave.kube.client import Client
from fleetwave.mgmt import rbac

NAMESPACE = "fleetwave-system"
SERVICE_ACCOUNT = rbac.NAME
_CRD = ("apiextensions.k8s.io/v1", "CustomResourceDefinition")


def rbac_documents(namespace: str = NAMESPACE) -> list[dict[str, Any]]:
    """The controller's namespace, ServiceAccount and least-privilege roles (`mgmt.rbac`, ADR 0047)."""
    return rbac.documents(namespace)


def install(client: Client, *, timeout: float = 60.0, namespace: str = NAMESPACE) -> list[str]:
    """Apply every CRD and the RBAC, wait until the CRDs are Established, then apply the admission
    policies. Returns CRD names.

    Server-side apply replaces each role's whole rule list, so re-installing over an older release
    also takes away what it no longer grants."""
    names = []
    for crd in crds.all_crds():
        sync_ops.apply(client, crd)
        names.append(crd["metadata"]["name"])
    for doc in rbac_documents(namespace):
        sync_ops.apply(client, doc)
    _wait_established(client, names, timeout)
    # After the CRDs serve: the policy validates MemberClusters (a namespaced one may only name a
    # kubeconfig Secret in its own namespace, ADR 0046); the controller checks the same rule again.
    for doc in crds.admission_policies():
        sync_ops.apply(client, doc)
    return names


def _wait_established(client: Client, names: list[str], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    pending = set(names)
    resource = kinds.builtin_resource(*_CRD)
    while pending:
        for name in sorted(pending):
            crd = client.get(resource, name)
            conditions = crd.status.conditions if crd.status else None
            if any(c.type == "Established" and c.status == "True" for c in conditions or []):
                pending.discard(name)
        if pending and time.monotonic() > deadline:
            raise TimeoutError(f"CRDs not Established after {timeout:.0f}s: {', '.join(sorted(pending))}")
        if pending:
            time.sleep(0.2)

"""`fleetwave install`: CRDs and least-privilege RBAC into the management cluster."""

from __future__ import annotations

import time
from importlib import resources
from pathlib import Path

import yaml

from fleetwave.api import crds
from fleetwave.kube import kinds, sync_ops
from fleetwave.kube.client import Client

NAMESPACE = "fleetwave-system"
_CRD = ("apiextensions.k8s.io/v1", "CustomResourceDefinition")


def rbac_documents() -> list[dict[str, object]]:
    text = _deploy_file("rbac.yaml")
    return [d for d in yaml.safe_load_all(text) if d]


def _deploy_file(name: str) -> str:
    for parent in Path(__file__).resolve().parents:
        candidate = parent / "deploy" / name
        if candidate.is_file():
            return candidate.read_text()
    return resources.files("fleetwave").joinpath(name).read_text()


def install(client: Client, *, timeout: float = 60.0) -> list[str]:
    """Apply every CRD and the RBAC, then wait until the CRDs are Established. Returns CRD names."""
    names = []
    for crd in crds.all_crds():
        sync_ops.apply(client, crd)
        names.append(crd["metadata"]["name"])
    for doc in rbac_documents():
        sync_ops.apply(client, doc)
    _wait_established(client, names, timeout)
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

"""Cluster API clusters on the test fleet's management cluster (ADR 0109): Cluster API's own
`Cluster` CRD (tools/capi/fetch.sh), Cluster objects with their `<name>-kubeconfig` Secrets, and their
status written through the status subresource as a Cluster API controller writes it. No Cluster API
controller runs: the tests play its part."""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx2
import yaml
from lightkube import ApiError, Client
from lightkube.types import PatchType

from fleetwave.kube import kinds, sync_ops

REPO = Path(__file__).resolve().parents[2]
CRD_NAME = "clusters.cluster.x-k8s.io"
CRD_FILE = "cluster.x-k8s.io_clusters.yaml"
NAMESPACE = "capi-fleet"  # where the tests' Cluster objects live
V1BETA2 = kinds.served_resource("cluster.x-k8s.io/v1beta2", "Cluster", "clusters", True)
SECRET_TYPE = "cluster.x-k8s.io/secret"
CRDS = kinds.builtin_resource("apiextensions.k8s.io/v1", "CustomResourceDefinition")
SECRETS = kinds.builtin_resource("v1", "Secret")


class Unavailable(RuntimeError):
    """The CRD could not be fetched (no network to the Go module proxy, and none cached)."""


def crd_dir() -> Path:
    """$FLEETWAVE_CAPI_DIR (scripts/test sets it), else what tools/capi/fetch.sh fetches and caches."""
    done = subprocess.run(
        ["bash", str(REPO / "tools" / "capi" / "fetch.sh")], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise Unavailable(done.stderr.strip())
    return Path(done.stdout.strip())


def install_crd(management: Client, directory: Path) -> None:
    """Cluster API's `Cluster` CRD, server-side applied, waited for until v1beta2 is served."""
    body = yaml.safe_load((directory / "crds" / CRD_FILE).read_text(encoding="utf-8"))
    management.apply(CRDS.from_dict(body), field_manager="capi-test", force=True)
    deadline = time.monotonic() + 60
    while True:
        try:
            list(management.list(V1BETA2, namespace="default"))
            return
        except (ApiError, httpx2.HTTPStatusError) as e:
            code = e.status.code if isinstance(e, ApiError) else e.response.status_code
            if code not in (404, 429) or time.monotonic() > deadline:
                raise
        time.sleep(0.1)


def remove_crd(management: Client) -> None:
    """Every Cluster (finalizers dropped: no Cluster API controller honours them), then the CRD,
    waited for until the API server no longer serves it."""
    with contextlib.suppress(ApiError, httpx2.HTTPStatusError):
        for obj in list(management.list(V1BETA2, namespace="*")):
            _drop_finalizers(management, obj.metadata.namespace, obj.metadata.name)
            with contextlib.suppress(ApiError):
                management.delete(V1BETA2, obj.metadata.name, namespace=obj.metadata.namespace)
    with contextlib.suppress(ApiError):
        management.delete(CRDS, CRD_NAME)
    deadline = time.monotonic() + 120
    while CRD_NAME in {c.metadata.name for c in management.list(CRDS)}:
        assert time.monotonic() < deadline, "Cluster API's CRD was not removed within 120s"
        time.sleep(0.2)


def create(
    management: Client,
    name: str,
    kubeconfig: bytes,
    labels: dict[str, str],
    *,
    namespace: str = NAMESPACE,
    ready: bool = True,
) -> None:
    """A Cluster and its `<name>-kubeconfig` Secret (key `value`, Cluster API's type and label), as
    Cluster API leaves them; its status provisioning, or ready as `mark_ready` writes it."""
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": f"{name}-kubeconfig",
            "namespace": namespace,
            "labels": {"cluster.x-k8s.io/cluster-name": name},
        },
        "type": SECRET_TYPE,
        "data": {"value": base64.b64encode(kubeconfig).decode()},
    }
    management.create(SECRETS.from_dict(secret))
    management.create(V1BETA2.from_dict(cluster_body(name, namespace, labels)))
    provisioning(management, name, namespace=namespace)
    if ready:
        mark_ready(management, name, namespace=namespace)


def cluster_body(name: str, namespace: str, labels: dict[str, str]) -> dict[str, Any]:
    """A v1beta2 Cluster as a kubeadm-based template writes it (its references name objects no
    controller here reconciles: only the status tells fleetwave anything)."""
    return {
        "apiVersion": "cluster.x-k8s.io/v1beta2",
        "kind": "Cluster",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "controlPlaneRef": {
                "apiGroup": "controlplane.cluster.x-k8s.io",
                "kind": "KubeadmControlPlane",
                "name": f"{name}-control-plane",
            },
            "infrastructureRef": {
                "apiGroup": "infrastructure.cluster.x-k8s.io",
                "kind": "DockerCluster",
                "name": name,
            },
        },
    }


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _condition(status: str, reason: str, message: str = "") -> dict[str, Any]:
    return {
        "type": "ControlPlaneInitialized",
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": _now(),
    }


def provisioning(management: Client, name: str, *, namespace: str = NAMESPACE) -> None:
    """Status as Cluster API writes it while the control plane comes up."""
    _status(
        management,
        name,
        namespace,
        {
            "phase": "Provisioning",
            "initialization": {"infrastructureProvisioned": True, "controlPlaneInitialized": False},
            "conditions": [_condition("False", "NotInitialized", "Control plane not yet initialized")],
        },
    )


def mark_ready(management: Client, name: str, *, namespace: str = NAMESPACE) -> None:
    """Status as Cluster API writes it once the control plane is initialized (v1beta2)."""
    _status(
        management,
        name,
        namespace,
        {
            "phase": "Provisioned",
            "initialization": {"infrastructureProvisioned": True, "controlPlaneInitialized": True},
            "conditions": [_condition("True", "Initialized")],
        },
    )


def _status(management: Client, name: str, namespace: str, status: dict[str, Any]) -> None:
    sync_ops.merge_patch(management, V1BETA2, name, {"status": status}, namespace=namespace, status=True)


def start_deleting(management: Client, name: str, *, namespace: str = NAMESPACE) -> None:
    """Deleted while Cluster API's finalizer holds it: deletionTimestamp set, the object still there
    (as while Cluster API tears the cluster down)."""
    management.patch(
        V1BETA2,
        name,
        {"metadata": {"finalizers": ["cluster.cluster.x-k8s.io"]}},
        namespace=namespace,
        patch_type=PatchType.MERGE,
    )
    management.delete(V1BETA2, name, namespace=namespace)


def finish_deleting(management: Client, name: str, *, namespace: str = NAMESPACE) -> None:
    _drop_finalizers(management, namespace, name)


def _drop_finalizers(management: Client, namespace: str, name: str) -> None:
    with contextlib.suppress(ApiError):
        management.patch(
            V1BETA2, name, {"metadata": {"finalizers": None}}, namespace=namespace, patch_type=PatchType.MERGE
        )

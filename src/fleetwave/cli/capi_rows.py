"""`fleetwave cluster list`'s rows for Cluster API clusters (ADR 0109): the clusters the Sveltos
family delivers to besides its registered members, read as the controller reads them."""

from __future__ import annotations

from typing import Any

from lightkube import Client

from fleetwave.controllers.fleet import capi
from fleetwave.kube import kinds, ops

# A list stops here: the table is for people, and `kubectl get clusters.cluster.x-k8s.io` pages.
MAX_ROWS = 5_000


def rows(client: Client, namespace: str) -> list[dict[str, Any]]:
    """One row per Cluster API Cluster, in whichever version Cluster API serves; none where it is
    not installed (or this user may not list Clusters: the registered members still show)."""
    for resource in kinds.capi_cluster_resources():
        try:
            found = []
            for obj in client.list(resource, namespace=namespace):
                found.append(row(obj if isinstance(obj, dict) else obj.to_dict()))
                if len(found) >= MAX_ROWS:
                    break
            return found
        except ops.StatusError as e:  # a plain-text 404 when the kind is not served at all
            if ops.code_of(e) not in (403, 404):
                raise
    return []


def row(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    standing = capi.standing(obj)
    version = ((obj.get("spec") or {}).get("topology") or {}).get("version") or ""
    return {
        "namespace": meta.get("namespace"),
        "name": meta.get("name"),
        "labels": dict(meta.get("labels") or {}),
        "ready": standing.ready,
        "version": version,
        "message": standing.why,
        "mode": "capi",
        "kubeconfigSecret": capi.kubeconfig_secret(str(meta.get("name"))),
    }

"""Register member clusters: kubeconfig into a Secret, a MemberCluster with selection labels, and a
probe of readiness and Kubernetes version written to its status.

The kubeconfig is only ever written to the Secret: it is never logged or echoed. It must pass the
member kubeconfig policy first (`kube.kubeconfig_policy`: inline credentials, https), so nothing is
written for one the controller would refuse to use.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fleetwave.api import families
from fleetwave.kube import client as kubeclient
from fleetwave.kube import kinds, ops, sync_ops

KUBECONFIG_KEY = "kubeconfig"
ALLOW_INSECURE_ANNOTATION = "fleetwave.io/allow-insecure-kubeconfig"
MEMBER_SECRET_LABEL = "fleetwave.io/member-cluster"  # on the kubeconfig Secret: the member it serves
KubeconfigRefused = kubeclient.KubeconfigRefused


@dataclass(frozen=True, slots=True)
class Probe:
    ready: bool
    version: str | None
    message: str
    nodes: int | None = None  # None: not known (the credentials may not list nodes)


def secret_name(cluster: str) -> str:
    return families.kubeconfig_secret_name(cluster)


def probe(kubeconfig: bytes, *, timeout: float = 5.0, allow_insecure: bool = False) -> Probe:
    """Is the member's API server reachable, ready, and which version is it?"""
    try:
        config = kubeclient.member_config(kubeconfig, allow_insecure=allow_insecure)
    except KubeconfigRefused as e:
        return Probe(False, None, str(e))
    try:
        with kubeclient.http(config, timeout=timeout) as http:
            ready = http.get("/readyz")
            if ready.status_code != 200:
                return Probe(False, None, f"API server not ready: /readyz answered {ready.status_code}")
            version = http.get("/version").json().get("gitVersion")
            return Probe(True, version, "API server ready", _node_count(http))
    except (ops.HTTPError, OSError, ValueError) as e:
        return Probe(False, None, f"API server unreachable: {type(e).__name__}: {e}")


def _node_count(http: Any) -> int | None:
    """The member's node count from one item of a chunked list: the rest is `remainingItemCount`."""
    try:  # never what makes a member unready: only a property placements may sort by
        listed = http.get("/api/v1/nodes", params={"limit": 1})
        if listed.status_code != 200:
            return None  # typically 403: placing by node count then sees no such property
        body = listed.json()
        remaining = (body.get("metadata") or {}).get("remainingItemCount") or 0
        count = len(body.get("items") or []) + int(remaining)
    except (ops.HTTPError, OSError, ValueError, TypeError, AttributeError):
        return None
    return count if count >= 0 else None


def register(
    client: kubeclient.Client,
    *,
    name: str,
    namespace: str,
    kubeconfig: bytes,
    labels: dict[str, str],
    allow_insecure: bool = False,
) -> Probe:
    """Write the Secret and the MemberCluster, then probe; KubeconfigRefused before writing anything."""
    kubeclient.member_config(kubeconfig, allow_insecure=allow_insecure)
    sync_ops.apply(client, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    sync_ops.apply(
        client,
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": secret_name(name),
                "namespace": namespace,
                "labels": {MEMBER_SECRET_LABEL: name},
            },
            "type": "Opaque",
            "stringData": {KUBECONFIG_KEY: kubeconfig.decode()},
        },
    )
    annotations = {ALLOW_INSECURE_ANNOTATION: "true"} if allow_insecure else {}
    member = {
        "apiVersion": f"{kinds.GROUP}/{kinds.VERSION}",
        "kind": "MemberCluster",
        "metadata": {"name": name, "namespace": namespace, "labels": labels, "annotations": annotations},
        "spec": {"kubeconfigSecretRef": {"name": secret_name(name), "key": KUBECONFIG_KEY}},
    }
    sync_ops.apply(client, member)
    result = probe(kubeconfig, allow_insecure=allow_insecure)
    write_status(client, name=name, namespace=namespace, result=result)
    return result


def write_status(client: kubeclient.Client, *, name: str, namespace: str, result: Probe) -> None:
    status: dict[str, Any] = {
        "ready": result.ready,
        "connectionStatus": "Healthy" if result.ready else "Down",
        "failureMessage": None if result.ready else result.message,
    }
    if result.version:
        status["version"] = result.version
    sync_ops.merge_patch(
        client, kinds.resource("MemberCluster"), name, {"status": status}, namespace=namespace, status=True
    )

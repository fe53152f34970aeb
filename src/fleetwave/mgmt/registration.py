"""Register member clusters: kubeconfig into a Secret, a MemberCluster with selection labels, and a
probe of readiness and Kubernetes version written to its status.

The kubeconfig is only ever written to the Secret: it is never logged or echoed. It must pass the
member kubeconfig policy first (`kube.kubeconfig_policy`: inline credentials, https), so nothing is
written for one the controller would refuse to use.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fleetwave.api import families
from fleetwave.delivery.target import CredentialsRefused, MemberTarget, MemberUnreachable
from fleetwave.kube import client as kubeclient
from fleetwave.kube import internals, kinds, ops, sync_ops

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


PROBE_TIMEOUT = 5.0


def probe(kubeconfig: bytes, *, timeout: float = PROBE_TIMEOUT, allow_insecure: bool = False) -> Probe:
    """Is the member's API server reachable, ready, and which version is it? (A connection of its
    own: registration runs once; the controller's periodic probes use `probe_pooled`.)"""
    try:
        config = kubeclient.member_config(kubeconfig, allow_insecure=allow_insecure)
    except KubeconfigRefused as e:
        return Probe(False, None, str(e))
    try:
        with kubeclient.http(config, timeout=timeout) as http:
            ready = http.get("/readyz")
            if ready.status_code != 200:
                return _not_ready(ready.status_code)
            version = http.get("/version").json().get("gitVersion")
            return Probe(True, version, "API server ready", _node_count(http))
    except (ops.HTTPError, OSError, ValueError) as e:
        return _unreachable(f"{type(e).__name__}: {e}")


async def probe_pooled(target: MemberTarget, *, details: bool = True) -> Probe:
    """`probe` over the member's pooled session: every probe of a large fleet would otherwise be a
    TLS handshake and a thread of its own, every PROBE_INTERVAL, for each member. The kubeconfig
    passes the policy when the pool opens a client for it (parsed once per kubeconfig, not per probe).
    Without `details` only `/readyz` is asked (version and node count come back None): what seldom
    changes need not cost two more requests per member at every probe."""
    try:
        async with asyncio.timeout(PROBE_TIMEOUT), target.session() as client:
            http = internals.raw_http(client)
            ready = await http.get("/readyz")
            if ready.status_code != 200:
                return _not_ready(ready.status_code)
            if not details:
                return Probe(True, None, "API server ready")
            version = (await http.get("/version")).json().get("gitVersion")
            try:  # never what makes a member unready: only a property placements may sort by
                listed = await http.get("/api/v1/nodes", params={"limit": 1})
                nodes = _nodes_listed(listed.status_code, listed.json)
            except (ops.HTTPError, ValueError):
                nodes = None
            return Probe(True, version, "API server ready", nodes)
    except CredentialsRefused as e:
        return Probe(False, None, e.detail)
    except MemberUnreachable as e:
        return _unreachable(e.detail)
    except (ops.HTTPError, OSError, ValueError) as e:  # TimeoutError is an OSError
        return _unreachable(f"{type(e).__name__}: {e}")


def _not_ready(status_code: int) -> Probe:
    return Probe(False, None, f"API server not ready: /readyz answered {status_code}")


def _unreachable(detail: str) -> Probe:
    return Probe(False, None, f"API server unreachable: {detail}")


def _node_count(http: Any) -> int | None:
    """The member's node count from one item of a chunked list: the rest is `remainingItemCount`."""
    try:  # never what makes a member unready: only a property placements may sort by
        listed = http.get("/api/v1/nodes", params={"limit": 1})
        return _nodes_listed(listed.status_code, listed.json)
    except (ops.HTTPError, OSError, ValueError):
        return None


def _nodes_listed(status_code: int, body: Callable[[], Any]) -> int | None:
    """The count a one-item node list gives (None when it was refused, typically 403: placing by
    node count then sees no such property)."""
    if status_code != 200:
        return None
    try:
        listed = body()
        remaining = (listed.get("metadata") or {}).get("remainingItemCount") or 0
        count = len(listed.get("items") or []) + int(remaining)
    except (ValueError, TypeError, AttributeError):
        return None
    return count if count >= 0 else None


@dataclass(frozen=True, slots=True)
class Registered:
    """What `register` wrote and found: the probe, and every member object (kind, apiVersion)."""

    probe: Probe
    written: tuple[tuple[str, str], ...]


def register(
    client: kubeclient.Client,
    *,
    name: str,
    namespace: str,
    kubeconfig: bytes,
    labels: dict[str, str],
    allow_insecure: bool = False,
) -> Registered:
    """Write the Secret and the MemberCluster, the upstream member objects where the cluster serves
    their groups (`upstream_members`), then probe; KubeconfigRefused before writing anything."""
    kubeclient.member_config(kubeconfig, allow_insecure=allow_insecure)
    require_served(client, name, namespace)
    sync_ops.apply(client, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    sync_ops.apply(client, _secret(name, namespace, kubeconfig))
    annotations = {ALLOW_INSECURE_ANNOTATION: "true"} if allow_insecure else {}
    member = {
        "apiVersion": f"{kinds.GROUP}/{kinds.VERSION}",
        "kind": "MemberCluster",
        "metadata": {"name": name, "namespace": namespace, "labels": labels, "annotations": annotations},
        "spec": {"kubeconfigSecretRef": {"name": secret_name(name), "key": KUBECONFIG_KEY}},
    }
    sync_ops.apply(client, member)
    written: list[tuple[str, str]] = [("MemberCluster", f"{kinds.GROUP}/{kinds.VERSION}")]
    for upstream in upstream_members(client, name=name, namespace=namespace, labels=labels):
        sync_ops.apply_as(client, kinds.resource_class(upstream.info), upstream.body)
        written.append((upstream.info.gvk.kind, upstream.info.gvk.api_version))
    result = probe(kubeconfig, allow_insecure=allow_insecure)
    write_status(client, name=name, namespace=namespace, result=result)
    return Registered(result, tuple(written))


def require_served(client: kubeclient.Client, name: str, namespace: str) -> None:
    """Nothing is written (least of all a kubeconfig Secret) to a cluster that does not serve
    MemberClusters: the wrong kubeconfig, or fleetwave not installed there. The API server's 404
    for the resource type is raised; one for the object (not registered yet) is what we expect."""
    try:
        client.get(kinds.resource("MemberCluster"), name, namespace=namespace)
    except ops.StatusError as e:
        if not ops.is_not_found(e) or ops.is_unserved(e):
            raise


def _secret(name: str, namespace: str, kubeconfig: bytes) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": secret_name(name),
            "namespace": namespace,
            "labels": {MEMBER_SECRET_LABEL: name},
        },
        "type": "Opaque",
        "stringData": {KUBECONFIG_KEY: kubeconfig.decode()},
    }


@dataclass(frozen=True, slots=True)
class UpstreamMember:
    info: kinds.KindInfo
    body: dict[str, Any]


def upstream_members(
    client: kubeclient.Client, *, name: str, namespace: str, labels: dict[str, str]
) -> list[UpstreamMember]:
    """The member as the upstream API families see it, for each family the cluster serves (after
    `install --upstream-apis`), so Sveltos- and KubeFleet-form objects select it as they are written:
    a SveltosCluster next to the Secret; a KubeFleet MemberCluster (cluster-scoped) when the Secret is
    where KubeFleet-group members' kubeconfigs are (`<name>-kubeconfig` in the controller's namespace)."""
    out = []
    resolver = kinds.SyncKinds(client)
    sveltos = resolver.served(kinds.GVK(families.SVELTOS_LIB, "SveltosCluster"))
    if sveltos is not None:
        spec = {"kubeconfigName": secret_name(name), "kubeconfigKeyName": KUBECONFIG_KEY}
        out.append(UpstreamMember(sveltos, _member_body(sveltos, name, namespace, labels, spec)))
    fleet = resolver.served(kinds.GVK(families.FLEET_CLUSTER, "MemberCluster"))
    if fleet is not None and namespace == families.CONTROLLER_NAMESPACE:
        out.append(UpstreamMember(fleet, _member_body(fleet, name, None, labels, {})))
    return out


def _member_body(
    info: kinds.KindInfo, name: str, namespace: str | None, labels: dict[str, str], spec: dict[str, Any]
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": labels}
    if namespace is not None:
        meta["namespace"] = namespace
    return {"apiVersion": info.gvk.api_version, "kind": info.gvk.kind, "metadata": meta, "spec": spec}


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

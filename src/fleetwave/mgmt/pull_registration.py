"""Register and unregister pull-mode members (ADR 0106).

A pull member gets, on the hub: its MemberCluster (`spec.pullMode: true`, no kubeconfig: the hub
holds none), its namespace `fleet-member-<name>` (KubeFleet's name), and there a ServiceAccount,
Role and RoleBinding that let its agent read its own work, report in its status, hold its lease and
record Events, and nothing else. The agent's credential is a token of that ServiceAccount from the
TokenRequest API: bound to the account, so unregistering (which deletes the account) revokes it, and
registering again issues a new one (rotation: the old one stays valid until it expires unless the
account is recreated with `rotate`).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

import yaml

from fleetwave.api import pullmode
from fleetwave.kube import client as kubeclient
from fleetwave.kube import kinds, ops, sync_ops
from fleetwave.mgmt import registration

TOKEN_SECONDS = 365 * 24 * 3600  # a year; `cluster register --pull` again issues a new one


class PullRegistrationError(Exception):
    """What stops a pull registration, said so the operator can act on it."""


@dataclass(frozen=True, slots=True)
class PullRegistered:
    hub_namespace: str
    hub_kubeconfig: bytes  # the agent's credential: written only where the operator asks
    written: tuple[tuple[str, str], ...]


def agent_rules() -> list[dict[str, Any]]:
    """The agent's rights on the hub, all in its member's namespace: its work (read), the work's status
    (write), its lease, Events about its work. No Secret, no other namespace."""
    return [
        {"apiGroups": [kinds.GROUP], "resources": ["memberworks"], "verbs": ["get", "list", "watch"]},
        {
            "apiGroups": [kinds.GROUP],
            "resources": ["memberworks/status"],
            "verbs": ["get", "update", "patch"],
        },
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": [pullmode.LEASE_NAME],
            "verbs": ["get", "update"],
        },
        {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
    ]


def register_pull(
    client: kubeclient.Client,
    *,
    name: str,
    namespace: str,
    labels: dict[str, str],
    hub_server: str,
    hub_ca: bytes | None,
    rotate: bool = False,
) -> PullRegistered:
    """Write the member and its hub namespace, account and rights; issue the agent's token."""
    registration.require_served(client, name, namespace)
    key = f"{namespace}/{name}"
    hub_ns = pullmode.hub_namespace(key)
    _claim_namespace(client, hub_ns, key)
    sync_ops.apply(client, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    member = {
        "apiVersion": f"{kinds.GROUP}/{kinds.VERSION}",
        "kind": "MemberCluster",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"pullMode": True},
    }
    sync_ops.apply(client, member)
    _forget_kubeconfig(client, name, namespace)
    written: list[tuple[str, str]] = [("MemberCluster", f"{kinds.GROUP}/{kinds.VERSION}")]
    for upstream in registration.upstream_members(client, name=name, namespace=namespace, labels=labels):
        sync_ops.apply_as(client, kinds.resource_class(upstream.info), _pull_view(upstream))
        written.append((upstream.info.gvk.kind, upstream.info.gvk.api_version))
    if rotate:
        ops_delete(client, "ServiceAccount", pullmode.AGENT_NAME, hub_ns)
    for body in _agent_objects(hub_ns, key):
        sync_ops.apply(client, body)
    token = sync_ops.request_token(client, pullmode.AGENT_NAME, hub_ns, seconds=TOKEN_SECONDS)
    return PullRegistered(hub_ns, hub_kubeconfig(hub_server, hub_ca, token, hub_ns), tuple(written))


def _forget_kubeconfig(client: kubeclient.Client, name: str, namespace: str) -> None:
    """A member that was registered in push mode before: the hub keeps no kubeconfig of a pull
    member, so the Secret `cluster register` wrote for it (labelled with it) is deleted."""
    resource = kinds.builtin_resource("v1", "Secret")
    found = sync_ops.get(client, resource, registration.secret_name(name), namespace=namespace)
    if found is not None and (found.metadata.labels or {}).get(registration.MEMBER_SECRET_LABEL) == name:
        client.delete(resource, registration.secret_name(name), namespace=namespace)


def _pull_view(upstream: registration.UpstreamMember) -> dict[str, Any]:
    """A SveltosCluster says `pullMode: true`; a KubeFleet MemberCluster (no such field) carries
    fleetwave's annotation."""
    body = dict(upstream.body)
    if upstream.info.gvk.kind == "SveltosCluster":
        body["spec"] = {"pullMode": True}
    else:
        meta = dict(body["metadata"])
        meta["annotations"] = {pullmode.PULL_ANNOTATION: "true"}
        body["metadata"] = meta
    return body


def _claim_namespace(client: kubeclient.Client, hub_ns: str, key: str) -> None:
    """The member's hub namespace, labelled with the member; one labelled for another is refused."""
    found = sync_ops.get(client, kinds.builtin_resource("v1", "Namespace"), hub_ns)
    if found is not None:
        owner = (found.metadata.labels or {}).get(pullmode.MEMBER_LABEL)
        if owner is not None and pullmode.member_of_label(owner) != key:
            raise PullRegistrationError(
                f"namespace {hub_ns} belongs to pull member {pullmode.member_of_label(owner)}; "
                "register this cluster under another name or namespace"
            )
        if owner is None:
            raise PullRegistrationError(
                f"namespace {hub_ns} exists and is not a fleetwave pull member's; delete or rename it first"
            )
    label = {pullmode.MEMBER_LABEL: pullmode.member_label(key)}
    sync_ops.apply(
        client, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": hub_ns, "labels": label}}
    )


def _agent_objects(hub_ns: str, key: str) -> list[dict[str, Any]]:
    meta = {
        "name": pullmode.AGENT_NAME,
        "namespace": hub_ns,
        "labels": {pullmode.MEMBER_LABEL: pullmode.member_label(key)},
    }
    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta}
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": meta,
        "rules": agent_rules(),
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": meta,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": pullmode.AGENT_NAME},
        "subjects": [{"kind": "ServiceAccount", "name": pullmode.AGENT_NAME, "namespace": hub_ns}],
    }
    return [account, role, binding]


def hub_kubeconfig(server: str, ca: bytes | None, token: str, namespace: str) -> bytes:
    """The agent's hub kubeconfig: inline CA and token (what the agent's policy accepts), no file
    references, the member's namespace as the default."""
    cluster: dict[str, Any] = {"server": server}
    if ca:
        cluster["certificate-authority-data"] = base64.b64encode(ca).decode()
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "hub", "cluster": cluster}],
        "users": [{"name": pullmode.AGENT_NAME, "user": {"token": token}}],
        "contexts": [
            {
                "name": "hub",
                "context": {"cluster": "hub", "user": pullmode.AGENT_NAME, "namespace": namespace},
            }
        ],
        "current-context": "hub",
    }
    return yaml.safe_dump(doc, sort_keys=False).encode()


def unregister(client: kubeclient.Client, *, name: str, namespace: str) -> list[str]:
    """Remove the member: its MemberCluster (and upstream views), its kubeconfig Secret (push), and for
    a pull member its hub namespace with the agent's account (revoking its token), work and lease.
    Nothing is withdrawn from the cluster: what it runs stays (ADR 0106)."""
    registration.require_served(client, name, namespace)  # a cluster without fleetwave: said so
    removed = []
    key = f"{namespace}/{name}"
    for kind, obj_name, obj_ns in (
        ("MemberCluster", name, namespace),
        ("Secret", registration.secret_name(name), namespace),
        ("Namespace", pullmode.hub_namespace(key), None),
    ):
        if ops_delete(client, kind, obj_name, obj_ns, owner=key):
            removed.append(f"{kind.lower()}/{obj_name}")
    for upstream in registration.upstream_members(client, name=name, namespace=namespace, labels={}):
        ns = upstream.body["metadata"].get("namespace")
        try:
            client.delete(kinds.resource_class(upstream.info), name, namespace=ns)
            removed.append(f"{upstream.info.gvk.kind.lower()}/{name}")
        except ops.StatusError as e:
            if not ops.is_not_found(e):
                raise
    return removed


def ops_delete(
    client: kubeclient.Client, kind: str, name: str, namespace: str | None, owner: str = ""
) -> bool:
    """Delete one object; False when it is not there. A Namespace is deleted only when it is the
    member's (labelled with `owner`)."""
    resource = (
        kinds.resource("MemberCluster") if kind == "MemberCluster" else kinds.builtin_resource("v1", kind)
    )
    if kind == "Namespace":
        found = sync_ops.get(client, resource, name)
        label = None if found is None else (found.metadata.labels or {}).get(pullmode.MEMBER_LABEL)
        if label is None or pullmode.member_of_label(label) != owner:
            return False
    try:
        client.delete(resource, name, namespace=namespace)
    except ops.StatusError as e:
        if not ops.is_not_found(e):
            raise
        return False
    return True

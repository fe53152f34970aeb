"""What `deploymentType: Local` content may write in the management cluster (a pure check).

Local content is applied with the controller's own client, so whatever the controller runs on is
within reach of a content author unless refused here: its leader and shard Leases (a Lease with a
duration of 68 years locks every replica out), Events (forgeable records in any namespace), RBAC
and admission configuration (rights and gates of the whole cluster), API registrations and
priority levels (who answers and who waits), fleetwave's own kinds and CRDs, its namespace, and
the kubeconfig Secrets of member clusters (rewriting one redirects a member's deliveries).

The deny-list below always holds. An operator who knows which kinds Local content is for can also
name them (`--local-content-kind`, Settings.local_content_kinds): then only those kinds pass.
The check runs when content is resolved and again before it is applied, so a snapshot pinned
before a rule existed is held to it too.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from fleetwave.controllers.fleet.capi import SECRET_TYPE as CAPI_SECRET_TYPE

# API groups whose every kind configures the control plane the controller itself runs on.
DENIED_GROUPS = frozenset(
    {
        "coordination.k8s.io",  # Leases: leader election and shards
        "events.k8s.io",
        "rbac.authorization.k8s.io",
        "admissionregistration.k8s.io",
        "apiregistration.k8s.io",
        "flowcontrol.apiserver.k8s.io",
        "authentication.k8s.io",
        "authorization.k8s.io",
        "certificates.k8s.io",
    }
)
# fleetwave's own API groups (profiles, summaries, snapshots, members, in every served family).
OWN_GROUPS = frozenset(
    {
        "fleetwave.io",
        "config.projectsveltos.io",
        "lib.projectsveltos.io",
        "placement.kubernetes-fleet.io",
        "cluster.kubernetes-fleet.io",
    }
)
MEMBER_SECRET_LABEL = "fleetwave.io/member-cluster"


def problem(
    obj: Mapping[str, Any],
    *,
    controller_namespace: str | None,
    kubeconfig_secrets: Collection[tuple[str, str]] = (),
    allowed_kinds: Collection[str] | None = None,
) -> str | None:
    """Why `obj` may not be Local content, or None. Names kind and name, never content."""
    group, _, _ = str(obj.get("apiVersion") or "").rpartition("/")
    kind = str(obj.get("kind") or "")
    meta = _mapping(obj.get("metadata"))
    name, namespace = str(meta.get("name") or ""), meta.get("namespace")
    if allowed_kinds is not None and not _allowed(group, kind, allowed_kinds):
        return f"{kind} is not among the kinds the operator allows for Local content"
    if group in OWN_GROUPS:
        return f"{group} is fleetwave's own API: the controller's rights there are not the author's"
    if group in DENIED_GROUPS or (group == "" and kind == "Event"):
        return f"{kind} configures what the controller itself runs on ({group or 'core'} is refused)"
    if kind == "CustomResourceDefinition" and _names_own_group(obj, name):
        return "a CustomResourceDefinition of fleetwave's own API is never Local content"
    if controller_namespace and (
        namespace == controller_namespace or (kind == "Namespace" and name == controller_namespace)
    ):
        return f"fleetwave's own namespace {controller_namespace} is never written by Local content"
    if group == "" and kind == "Secret" and _member_secret(meta, name, namespace, kubeconfig_secrets):
        return "a member cluster's kubeconfig Secret is never written by Local content"
    if group == "" and kind == "Secret" and obj.get("type") == CAPI_SECRET_TYPE:
        return (
            f"a Secret of type {CAPI_SECRET_TYPE} (Cluster API credentials) is never written by Local content"
        )
    return None


def _allowed(group: str, kind: str, allowed: Collection[str]) -> bool:
    """`Kind` (core group) or `group/Kind` entries; `group/*` allows a whole group."""
    qualified = f"{group}/{kind}" if group else kind
    return qualified in allowed or (bool(group) and f"{group}/*" in allowed)


def _names_own_group(obj: Mapping[str, Any], name: str) -> bool:
    spec = _mapping(obj.get("spec"))
    group = str(spec.get("group") or name.partition(".")[2])
    return group in OWN_GROUPS or name.partition(".")[2] in OWN_GROUPS


def _member_secret(
    meta: Mapping[str, Any], name: str, namespace: Any, kubeconfig_secrets: Collection[tuple[str, str]]
) -> bool:
    labels = _mapping(meta.get("labels"))
    return MEMBER_SECRET_LABEL in labels or (str(namespace or "default"), name) in kubeconfig_secrets


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}

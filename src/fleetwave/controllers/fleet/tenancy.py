"""Tenant admins (ADR 0111): who a tenant's deliveries act as on a member.

Sveltos marks a profile written by a tenant admin with the labels `projectsveltos.io/serviceaccount-
name` and `projectsveltos.io/serviceaccount-namespace`; a RoleRequest grants that ServiceAccount rules
in the clusters it selects. fleetwave delivers such a profile's content *as* that ServiceAccount: the
member kubeconfig gains `as: system:serviceaccount:<ns>:<name>` (and the ServiceAccount groups), so
the member's API server itself refuses what the tenant may not do. Pure functions.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fleetwave.delivery.target import MemberTarget
from fleetwave.kube import kubeconfig_policy

SA_NAME_LABEL = "projectsveltos.io/serviceaccount-name"
SA_NAMESPACE_LABEL = "projectsveltos.io/serviceaccount-namespace"
TENANT_LABELS = (SA_NAME_LABEL, SA_NAMESPACE_LABEL)
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


@dataclass(frozen=True, slots=True)
class TenantAdmin:
    namespace: str
    name: str

    @property
    def username(self) -> str:
        return f"system:serviceaccount:{self.namespace}:{self.name}"

    @property
    def groups(self) -> tuple[str, ...]:
        """The groups the API server gives a ServiceAccount's own token: a RoleBinding to any of
        them applies to the impersonated tenant as it would to the real one."""
        return ("system:serviceaccounts", f"system:serviceaccounts:{self.namespace}", "system:authenticated")

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


def tenant_labels(labels: Mapping[str, str] | None) -> dict[str, str]:
    """The tenant labels among `labels` (what a profile hands its summaries)."""
    return {k: str(v) for k, v in (labels or {}).items() if k in TENANT_LABELS}


def admin_of(labels: Mapping[str, str] | None) -> TenantAdmin | str | None:
    """The tenant admin `labels` name; None when they name none; a message when they name one
    half or with a name that is not a ServiceAccount's (nothing is then delivered)."""
    found = tenant_labels(labels)
    if not found:
        return None
    name, namespace = found.get(SA_NAME_LABEL, ""), found.get(SA_NAMESPACE_LABEL, "")
    if not name or not namespace:
        return f"labels {SA_NAME_LABEL} and {SA_NAMESPACE_LABEL} name a tenant admin together: set both"
    if not _DNS_SUBDOMAIN.match(name) or not _DNS_LABEL.match(namespace):
        return f"labels {SA_NAME_LABEL}/{SA_NAMESPACE_LABEL} do not name a ServiceAccount"
    return TenantAdmin(namespace, name)


def acting_as(kubeconfig: bytes, admin: TenantAdmin, *, allow_insecure: bool) -> bytes:
    """The member's canonical kubeconfig, acting as `admin` (any `as` of its own replaced).
    Raises KubeconfigRefused as `kubeconfig_policy.load` does."""
    document = kubeconfig_policy.load(kubeconfig, allow_insecure=allow_insecure)
    user = document["users"][0]["user"]
    user["as"], user["as-groups"] = admin.username, list(admin.groups)
    return json.dumps(document, sort_keys=True).encode()


def as_controller(target: MemberTarget) -> MemberTarget:
    """A tenant's target acting as fleetwave itself again, for what only removes what the tenant's
    summary delivered: finding it takes a list across namespaces the tenant may not read, and only
    objects carrying the summary's inventory label are deleted (ADR 0111)."""
    if not target.tenant:
        return target
    document = kubeconfig_policy.load(target.kubeconfig, allow_insecure=target.allow_insecure)
    for key in ("as", "as-groups"):
        document["users"][0]["user"].pop(key, None)
    return dataclasses.replace(target, kubeconfig=json.dumps(document, sort_keys=True).encode(), tenant="")


# RoleRequests (ADR 0111): what fleetwave creates in each selected member for a tenant admin.
REQUEST_LABEL = "projectsveltos.io/role-request-name"  # upstream's, on everything made for a request
RBAC = "rbac.authorization.k8s.io/v1"
GRANTABLE = ("Role", "ClusterRole")
MAX_ROLES = 64


def roles_problem(objects: list[dict[str, Any]]) -> str:
    """Why these objects cannot be granted ("" when they can): only Roles and ClusterRoles of
    rbac.authorization.k8s.io/v1 — a binding, or anything else, could hand out what the request
    does not name."""
    if len(objects) > MAX_ROLES:
        return f"roleRefs hold {len(objects)} objects, more than {MAX_ROLES}"
    for obj in objects:
        if obj.get("apiVersion") != RBAC or obj.get("kind") not in GRANTABLE:
            what = f"{obj.get('kind')} ({obj.get('apiVersion')})"[:80]
            return f"roleRefs may hold only Roles and ClusterRoles of {RBAC}, not {what}"
    return ""


def member_objects(request: str, admin: TenantAdmin, roles: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ServiceAccount, each role (a Role without a namespace goes to the admin's) and a binding
    of each to the ServiceAccount, all labelled with the request (pure)."""
    label = {REQUEST_LABEL: request}
    account = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": admin.name, "namespace": admin.namespace, "labels": label},
    }
    out: list[dict[str, Any]] = [account]
    for role in roles:
        meta = dict(role.get("metadata") or {})
        meta["labels"] = {**(meta.get("labels") or {}), **label}
        if role["kind"] == "Role":
            meta["namespace"] = meta.get("namespace") or admin.namespace
        out += [{**role, "metadata": meta}, _binding(request, admin, role["kind"], meta)]
    return out


def _binding(request: str, admin: TenantAdmin, kind: str, role_meta: Mapping[str, Any]) -> dict[str, Any]:
    name = _bounded(f"{request}-{kind.lower()}-{role_meta['name']}")
    meta: dict[str, Any] = {"name": name, "labels": {REQUEST_LABEL: request}}
    if kind == "Role":
        meta["namespace"] = role_meta["namespace"]
    return {
        "apiVersion": RBAC,
        "kind": "RoleBinding" if kind == "Role" else "ClusterRoleBinding",
        "metadata": meta,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role_meta["name"]},
        "subjects": [{"kind": "ServiceAccount", "name": admin.name, "namespace": admin.namespace}],
    }


def _bounded(name: str) -> str:
    if len(name) <= 253:
        return name
    return f"{name[:200]}-{hashlib.sha256(name.encode()).hexdigest()[:16]}"


def plan(matching: set[str], provisioned: set[str]) -> tuple[list[str], list[str]]:
    """(clusters to grant in, clusters to withdraw from): a cluster that stopped matching loses its
    grant; every matching one is (re)granted (pure)."""
    return sorted(matching), sorted(provisioned - matching)

"""Tenant admins (ADR 0111): who a tenant's deliveries act as on a member.

Sveltos marks a profile written by a tenant admin with the labels `projectsveltos.io/serviceaccount-
name` and `projectsveltos.io/serviceaccount-namespace`; a RoleRequest grants that ServiceAccount rules
in the clusters it selects. fleetwave delivers such a profile's content *as* that ServiceAccount: the
member kubeconfig gains `as: system:serviceaccount:<ns>:<name>` (and the ServiceAccount groups), so
the member's API server itself refuses what the tenant may not do. Pure functions.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

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

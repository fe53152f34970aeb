"""The controller's RBAC in the management cluster: exactly the API calls the controllers make (ADR 0047).

Member clusters are reached with the kubeconfigs registered in MemberCluster Secrets, never with
these permissions. No rule names a wildcard group, resource, subresource or verb, so nothing the
API server adds later (or already serves, such as `nodes/proxy`, `pods/exec`, `pods/attach`) is
granted by accident; `escalate`, `bind` and `impersonate` are never granted.

Where each rule comes from:

- informers (`controllers/app.py`, `controllers/kubefleet/__init__.py`) list and watch every
  fleetwave kind, ConfigMaps and Secrets, and every kind a placement may select
  (`kubefleet.SELECTABLE`), in all namespaces: `get`/`list`/`watch`, nothing else. Secrets are read
  cluster-wide once, by this one rule: the same informer serves member kubeconfig Secrets (in each
  MemberCluster's namespace), profile content (`policyRefs`/`valuesFrom`) and placements that
  select Secrets;
- writes to fleetwave's kinds: stage profiles and summaries are server-side applied (`patch`, and
  `create` when absent) and deleted; a summary's finalizer is a merge patch; a promotion's manual
  approval is reset by a JSON patch; resource snapshots are created, relabelled and pruned; approval
  requests are created; statuses are merge-patched through the `status` subresource;
- `update` on the `finalizers` subresource of the kinds that own what the controller creates with
  `blockOwnerDeletion` (promotion -> profile, profile -> summary, update run -> approval request):
  API servers running the OwnerReferencesPermissionEnforcement admission plugin require it;
- core Events: `create`, and `patch` to count repeats, in whatever namespace the object lives in
  (cluster-scoped objects: `default`);
- in the controller's own namespace only (a Role): the leader-election Lease, or with `--shards`
  the shard Leases and replica heartbeats (`create`, `get`, `list`, `update`, `patch`, `delete`:
  their names depend on the shard count and the replica), and content snapshots, which are
  immutable and content-addressed, so `create` is all: ConfigMaps, and Secrets for content that
  came from Secrets. No `update`, `patch` or `delete` of any Secret, anywhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fleetwave.api import models
from fleetwave.api.families import Family
from fleetwave.api.meta import API_VERSION

NAME = "fleetwave-controller"  # the ServiceAccount, roles, bindings and the leader-election Lease
GROUP = API_VERSION.split("/")[0]
RBAC_API = "rbac.authorization.k8s.io/v1"
READ = ("get", "list", "watch")


@dataclass(frozen=True, slots=True)
class Rule:
    group: str
    resources: tuple[str, ...]
    verbs: tuple[str, ...]
    resource_names: tuple[str, ...] = ()

    def manifest(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "apiGroups": [self.group],
            "resources": list(self.resources),
            "verbs": list(self.verbs),
        }
        if self.resource_names:
            out["resourceNames"] = list(self.resource_names)
        return out


def _plural(kind: str) -> str:
    return models.KINDS[kind].plural


def _plurals(*kinds: str) -> tuple[str, ...]:
    return tuple(_plural(k) for k in kinds)


# Every kind a placement may select (kubefleet.SELECTABLE), by API group; ConfigMaps and Secrets are
# read by the same rule as the composition root's informers.
SELECTABLE_CORE = ("namespaces", "configmaps", "secrets", "serviceaccounts", "services")
SELECTABLE_APPS = ("deployments", "statefulsets", "daemonsets")
SELECTABLE_BATCH = ("jobs", "cronjobs")
SELECTABLE_RBAC = ("roles", "rolebindings", "clusterroles", "clusterrolebindings")

# Kinds whose status the controllers write.
STATUS_WRITTEN = (
    "ClusterPromotion",
    "ClusterProfile",
    "ClusterSummary",
    "MemberCluster",
    "ClusterResourcePlacement",
    "ResourcePlacement",
    "ClusterStagedUpdateRun",
    "StagedUpdateRun",
    "ClusterApprovalRequest",
    "ApprovalRequest",
)
# Kinds that own (controller, blockOwnerDeletion) objects the controllers create.
OWNERS = ("ClusterPromotion", "ClusterProfile", "ClusterStagedUpdateRun", "StagedUpdateRun")


def cluster_rules() -> list[Rule]:
    return [
        # Informers over fleetwave's own kinds.
        Rule(GROUP, tuple(sorted(m.plural for m in models.KINDS.values())), READ),
        # Stage profiles (promotion) and summaries (profile): server-side apply, delete; a summary's
        # finalizer is a merge patch.
        Rule(GROUP, _plurals("ClusterProfile", "ClusterSummary"), ("create", "patch", "delete")),
        # A promotion's manual gate is reset (JSON patch of spec.stages[i].trigger.manual.approved);
        # promotions and placements carry a cleanup finalizer (merge patch of metadata.finalizers).
        Rule(
            GROUP, _plurals("ClusterPromotion", "ClusterResourcePlacement", "ResourcePlacement"), ("patch",)
        ),
        # Resource snapshots: cut, unmarked as latest, pruned past the revision history limit.
        Rule(GROUP, _plurals("ClusterResourceSnapshot", "ResourceSnapshot"), ("create", "patch", "delete")),
        # Approval requests of staged update runs.
        Rule(GROUP, _plurals("ClusterApprovalRequest", "ApprovalRequest"), ("create",)),
        Rule(GROUP, tuple(f"{_plural(k)}/status" for k in STATUS_WRITTEN), ("patch",)),
        Rule(GROUP, tuple(f"{_plural(k)}/finalizers" for k in OWNERS), ("update",)),
        # Informers over everything a placement may select, profile content and kubeconfig Secrets.
        Rule("", SELECTABLE_CORE, READ),
        Rule("apps", SELECTABLE_APPS, READ),
        Rule("batch", SELECTABLE_BATCH, READ),
        Rule("rbac.authorization.k8s.io", SELECTABLE_RBAC, READ),
        # Events about our objects, in their namespaces; repeats bump the count.
        Rule("", ("events",), ("create", "patch")),
    ]


UPSTREAM_NAME = f"{NAME}-upstream-apis"


def family_rules(family: Family) -> list[Rule]:
    """What the controllers of one upstream API family (ADR 0062) need on its groups: the same verbs
    as on the native kinds it serves, nothing on kinds it does not serve."""
    by_group: dict[str, list[str]] = {}
    for served in family.kinds.values():
        by_group.setdefault(served.group, []).append(served.plural)
    rules = [Rule(group, tuple(sorted(plurals)), READ) for group, plurals in sorted(by_group.items())]

    def grant(kinds: tuple[str, ...], verbs: tuple[str, ...], sub: str = "") -> None:
        groups: dict[str, list[str]] = {}
        for kind in kinds:
            if kind in family.kinds:
                served = family.served(kind)
                groups.setdefault(served.group, []).append(served.plural + sub)
        rules.extend(Rule(g, tuple(sorted(p)), verbs) for g, p in sorted(groups.items()))

    grant(("ClusterProfile", "ClusterSummary"), ("create", "patch", "delete"))
    grant(("ClusterPromotion", "ClusterResourcePlacement", "ResourcePlacement"), ("patch",))
    grant(("ClusterResourceSnapshot", "ResourceSnapshot"), ("create", "patch", "delete"))
    grant(("ClusterApprovalRequest", "ApprovalRequest"), ("create",))
    grant(STATUS_WRITTEN, ("patch",), "/status")
    grant(OWNERS, ("update",), "/finalizers")
    return rules


def upstream_documents(namespace: str, served: tuple[Family, ...]) -> list[dict[str, Any]]:
    """A ClusterRole + binding for the upstream API families (`install --upstream-apis` only: a
    fleetwave without them has no rights on another project's groups)."""
    return [
        {
            "apiVersion": RBAC_API,
            "kind": "ClusterRole",
            "metadata": {"name": UPSTREAM_NAME},
            "rules": [r.manifest() for f in served for r in family_rules(f)],
        },
        {
            "apiVersion": RBAC_API,
            "kind": "ClusterRoleBinding",
            "metadata": {"name": UPSTREAM_NAME},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": UPSTREAM_NAME,
            },
            "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": namespace}],
        },
    ]


def namespace_rules() -> list[Rule]:
    return [
        # The leader Lease, or with `--shards` the shard Leases and each replica's heartbeat (ADR 0067),
        # whose names depend on the shard count and the replica: only here, in its own namespace.
        Rule("coordination.k8s.io", ("leases",), ("create", "get", "list", "update", "patch", "delete")),
        # Immutable content snapshots (`fw-content-<hash>`), created once and never rewritten.
        Rule("", ("configmaps", "secrets"), ("create",)),
    ]


def documents(namespace: str) -> list[dict[str, Any]]:
    """Namespace, ServiceAccount, ClusterRole + binding, Role + binding in `namespace`."""
    subject = [{"kind": "ServiceAccount", "name": NAME, "namespace": namespace}]
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": NAME, "namespace": namespace}},
        {
            "apiVersion": RBAC_API,
            "kind": "ClusterRole",
            "metadata": {"name": NAME},
            "rules": [r.manifest() for r in cluster_rules()],
        },
        {
            "apiVersion": RBAC_API,
            "kind": "ClusterRoleBinding",
            "metadata": {"name": NAME},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": NAME},
            "subjects": subject,
        },
        {
            "apiVersion": RBAC_API,
            "kind": "Role",
            "metadata": {"name": NAME, "namespace": namespace},
            "rules": [r.manifest() for r in namespace_rules()],
        },
        {
            "apiVersion": RBAC_API,
            "kind": "RoleBinding",
            "metadata": {"name": NAME, "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": NAME},
            "subjects": subject,
        },
    ]

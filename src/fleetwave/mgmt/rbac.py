"""The controller's RBAC in the management cluster: exactly the API calls the controllers make (ADR 0047).

Member clusters are reached with the kubeconfigs registered in MemberCluster Secrets, never with
these permissions. No rule names a wildcard group, resource, subresource or verb, so nothing the
API server adds later (or already serves, such as `nodes/proxy`, `pods/exec`, `pods/attach`) is
granted by accident; `escalate`, `bind` and `impersonate` are never granted.

Where each rule comes from:

- informers (`controllers/app.py`, `controllers/kubefleet/__init__.py`) list and watch every
  fleetwave kind, ConfigMaps and Secrets, and every kind a placement may select
  (`kube.placeable`), in all namespaces: `get`/`list`/`watch`, nothing else. Secrets are read
  cluster-wide once, by this one rule: the same informer serves member kubeconfig Secrets (in each
  MemberCluster's namespace), profile content (`policyRefs`/`valuesFrom`) and placements that
  select Secrets;
- writes to fleetwave's kinds: stage profiles and summaries are server-side applied (`patch`, and
  `create` when absent) and deleted; a summary's finalizer is a merge patch; a promotion's manual
  approval is reset by a JSON patch; members' labels are merge-patched (Sveltos' registration labels,
  `projectsveltos.io/k8s-version` and `sveltos-agent`; SveltosClusters and native members, never a
  KubeFleet MemberCluster); a RoleRequest's finalizer is a merge patch; resource snapshots are
  created, relabelled and pruned; approval requests are created; statuses are merge-patched
  through the `status` subresource;
- `update` on the `finalizers` subresource of the kinds that own what the controller creates with
  `blockOwnerDeletion` (promotion -> profile, profile -> summary, update run -> approval request):
  API servers running the OwnerReferencesPermissionEnforcement admission plugin require it;
- pull members (ADR 0106): MemberWork `create`, `patch` (server-side apply) and `delete`, and
  Leases read (`get`, `list`, `watch`) to see which pull members' agents are connected; nothing in
  a pull member's hub namespace is written but its work;
- with the Sveltos groups (`install --upstream-apis`), Cluster API's `clusters.cluster.x-k8s.io`:
  `get`/`list`/`watch` only, the members Sveltos takes from Cluster API (ADR 0109);
- core Events: `create`, and `patch` to count repeats, in whatever namespace the object lives in
  (cluster-scoped objects: `default`);
- with `--watch-namespace` (ADR 0074) every rule on a namespaced resource moves out of the
  ClusterRole into a second ClusterRole granted only through a RoleBinding in each watched
  namespace (`fleetwave-controller-watched`), so Secrets and everything else namespaced are read
  nowhere else. Events stay cluster-wide (`create`/`patch` only: the Events of cluster-scoped objects
  go to `default`);
- in the controller's own namespace only (a Role): the leader-election Lease, or with `--shards`
  the shard Leases and replica heartbeats (`create`, `get`, `list`, `update`, `patch`, `delete`:
  their names depend on the shard count and the replica), and content snapshots, which are
  immutable and content-addressed, so they are created and never changed: ConfigMaps (`create`,
  and `delete` when no rollout names a snapshot any more, ADR 0084), and Secrets for content that
  came from Secrets (`create` only: each is owned by an anchor ConfigMap, whose deletion the
  garbage collector follows). No `update`, `patch` or `delete` of any Secret, anywhere.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from fleetwave.api import families, groups, models
from fleetwave.api.families import Family
from fleetwave.api.meta import API_VERSION
from fleetwave.kube import kinds, placeable
from fleetwave.kube.kinds import KindInfo

NAME = "fleetwave-controller"  # the ServiceAccount, roles, bindings and the leader-election Lease
WATCHED_NAME = f"{NAME}-watched"  # bound in each watched namespace (`--watch-namespace`)
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


def placeable_rules() -> list[Rule]:
    """Read rights on every built-in kind a placement may select (`kube.placeable`), one rule per
    API group; ConfigMaps and Secrets are read by the same rule as the composition root's informers.
    Groups and resources stay in the table's order, which is the order the chart ships."""
    by_group: dict[str, list[str]] = {}
    for info in placeable.BUILTIN:
        by_group.setdefault(info.gvk.group, []).append(info.plural)
    return [Rule(group, tuple(plurals), READ) for group, plurals in by_group.items()]


# Snapshots the controllers cut: of placements' resources and of overrides.
SNAPSHOTS = (
    "ClusterResourceSnapshot",
    "ResourceSnapshot",
    "ClusterResourceOverrideSnapshot",
    "ResourceOverrideSnapshot",
)
# Kinds whose status the controllers write.
STATUS_WRITTEN = (
    "ClusterPromotion",
    "ClusterProfile",
    "Profile",
    "ClusterSummary",
    "ClusterReport",
    "MemberCluster",
    "ClusterResourcePlacement",
    "ResourcePlacement",
    "ClusterStagedUpdateRun",
    "StagedUpdateRun",
    "ClusterApprovalRequest",
    "ApprovalRequest",
    "RoleRequest",
    "ClusterResourcePlacementEviction",
    "ClusterSet",
    "Set",
)
# Kinds the controllers merge-patch besides their status (finalizers, a manual gate, labels).
PATCHED = (
    "ClusterPromotion",
    "Profile",
    "ClusterResourcePlacement",
    "ResourcePlacement",
    "MemberCluster",
    "RoleRequest",
)
# Kinds that own (controller, blockOwnerDeletion) objects the controllers create.
OWNERS = ("ClusterPromotion", "ClusterProfile", "ClusterStagedUpdateRun", "StagedUpdateRun")


def cluster_rules() -> list[Rule]:
    return [
        # Informers over fleetwave's own kinds.
        Rule(GROUP, tuple(sorted(m.plural for m in models.KINDS.values())), READ),
        # Stage profiles (promotion), summaries (profile) and DryRun reports (summary): server-side
        # apply, delete; a summary's finalizer is a merge patch.
        Rule(
            GROUP,
            _plurals("ClusterProfile", "ClusterSummary", "ClusterReport"),
            ("create", "patch", "delete"),
        ),
        # A promotion's manual gate is reset (JSON patch of spec.stages[i].trigger.manual.approved);
        # promotions and placements carry a cleanup finalizer (merge patch of metadata.finalizers);
        # members carry Sveltos' registration labels (merge patch of metadata.labels).
        Rule(GROUP, _plurals(*PATCHED), ("patch",)),
        # Resource and override snapshots: cut, unmarked as latest, pruned past the history limit.
        Rule(GROUP, _plurals(*SNAPSHOTS), ("create", "patch", "delete")),
        # Approval requests of staged update runs.
        Rule(GROUP, _plurals("ClusterApprovalRequest", "ApprovalRequest"), ("create",)),
        # Pull members' work (ADR 0106): server-side applied into their hub namespaces, deleted once
        # their agent reported it withdrawn.
        Rule(GROUP, _plurals("MemberWork"), ("create", "patch", "delete")),
        # Pull members' agents' leases (their liveness), listed by label in their hub namespaces.
        Rule("coordination.k8s.io", ("leases",), READ),
        Rule(GROUP, tuple(f"{_plural(k)}/status" for k in STATUS_WRITTEN), ("patch",)),
        Rule(GROUP, tuple(f"{_plural(k)}/finalizers" for k in OWNERS), ("update",)),
        # Informers over everything a placement may select, profile content and kubeconfig Secrets.
        *placeable_rules(),
        # Events about our objects, in their namespaces; repeats bump the count.
        Rule("", ("events",), ("create", "patch")),
    ]


# Built-in resources the rules name that are not namespaced: of the placeable kinds (the other
# built-in ones named here, configmaps, secrets, events, leases, are namespaced); fleetwave's kinds
# (native and upstream) say their own scope.
_CLUSTER_SCOPED_BUILTIN = frozenset((i.gvk.group, i.plural) for i in placeable.BUILTIN if not i.namespaced)
# Kept cluster-wide even when namespaces are watched: write-only, and the Events of cluster-scoped
# objects are recorded in `default`.
_ALWAYS_CLUSTER_WIDE = frozenset({("", "events")})


def _namespaced(group: str, resource: str) -> bool:
    plural = resource.partition("/")[0]  # a subresource has its parent's scope
    if (group, plural) in _CLUSTER_SCOPED_BUILTIN:
        return False
    for family in (families.NATIVE, *families.UPSTREAM):
        for served in family.kinds.values():
            if (served.group, served.plural) == (group, plural):
                return served.namespaced
    return True  # every other built-in resource named here (configmaps, deployments, ...) is


def split(rules: list[Rule]) -> tuple[list[Rule], list[Rule]]:
    """`rules` as (cluster-scoped part, namespaced part): each rule's resources sorted by scope."""
    cluster: list[Rule] = []
    namespaced: list[Rule] = []
    for rule in rules:
        if all((rule.group, r) in _ALWAYS_CLUSTER_WIDE for r in rule.resources):
            cluster.append(rule)
            continue
        inside = tuple(r for r in rule.resources if _namespaced(rule.group, r))
        outside = tuple(r for r in rule.resources if not _namespaced(rule.group, r))
        if outside:
            cluster.append(Rule(rule.group, outside, rule.verbs, rule.resource_names))
        if inside:
            namespaced.append(Rule(rule.group, inside, rule.verbs, rule.resource_names))
    return cluster, namespaced


UPSTREAM_NAME = f"{NAME}-upstream-apis"
PLACEMENT_KINDS_NAME = f"{NAME}-placement-kinds"  # `--placement-kind` (ADR 0091)


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

    grant(("ClusterProfile", "ClusterSummary", "ClusterReport"), ("create", "patch", "delete"))
    grant(
        ("ClusterPromotion", "Profile", "ClusterResourcePlacement", "ResourcePlacement", "RoleRequest"),
        ("patch",),
    )
    if "MemberCluster" in family.kinds and family.served("MemberCluster").kind == "SveltosCluster":
        grant(("MemberCluster",), ("patch",))  # Sveltos' registration labels
    grant(SNAPSHOTS, ("create", "patch", "delete"))
    grant(("ClusterApprovalRequest", "ApprovalRequest"), ("create",))
    grant(STATUS_WRITTEN, ("patch",), "/status")
    grant(OWNERS, ("update",), "/finalizers")
    if family.capi:
        # Cluster API clusters are members of the family's fleet (ADR 0109): read, nothing else. Their
        # kubeconfig Secrets are read by the Secret rule every member's kubeconfig is.
        rules.append(Rule(groups.CAPI_GROUP, (groups.CAPI_PLURAL,), READ))
    return rules


def upstream_documents(
    namespace: str, served: tuple[Family, ...], watch: tuple[str, ...] = ()
) -> list[dict[str, Any]]:
    """A ClusterRole + binding for the upstream API families (`install --upstream-apis` only: a
    fleetwave without them has no rights on another project's groups); with `watch`, their
    namespaced part is bound only in those namespaces."""
    rules = [r for f in served for r in family_rules(f)]
    return _scoped(UPSTREAM_NAME, namespace, rules, watch)


FLUX_SOURCES_NAME = f"{NAME}-flux-sources"  # `--flux-sources` (ADR 0103)


def flux_source_rules() -> list[Rule]:
    """Read rights on Flux's source kinds (`--flux-sources`): their status announces the artifact;
    the artifact itself is fetched from source-controller over HTTP, with no Kubernetes right."""
    group = kinds.FLUX_SOURCE_API_VERSION.partition("/")[0]
    return [Rule(group, tuple(sorted(kinds.FLUX_SOURCE_PLURALS.values())), READ)]


def flux_source_documents(namespace: str, watch: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """A ClusterRole + binding reading Flux sources (`install --flux-sources` only); with `watch`,
    bound only in the watched namespaces."""
    return _scoped(FLUX_SOURCES_NAME, namespace, flux_source_rules(), watch)


def placement_kind_rules(infos: Iterable[KindInfo]) -> list[Rule]:
    """Read rights on the kinds placements may select besides the built-in ones (ADR 0091)."""
    by_group: dict[str, set[str]] = {}
    for info in infos:
        by_group.setdefault(info.gvk.group, set()).add(info.plural)
    return [Rule(group, tuple(sorted(plurals)), READ) for group, plurals in sorted(by_group.items())]


def placement_kind_documents(
    namespace: str, infos: Iterable[KindInfo], watch: tuple[str, ...] = ()
) -> list[dict[str, Any]]:
    """A ClusterRole + binding reading the configured placement kinds; with `watch`, the namespaced
    kinds are read only in those namespaces (scope from discovery, not from fleetwave's tables)."""
    listed = list(infos)
    if not watch:
        return _scoped(PLACEMENT_KINDS_NAME, namespace, placement_kind_rules(listed), ())
    name, watched = PLACEMENT_KINDS_NAME, f"{PLACEMENT_KINDS_NAME}-watched"
    return [
        _cluster_role(name, placement_kind_rules(i for i in listed if not i.namespaced)),
        _binding(name, namespace, "ClusterRole", name),
        _cluster_role(watched, placement_kind_rules(i for i in listed if i.namespaced)),
        *(
            _binding(watched, namespace, "ClusterRole", watched, ns)
            for ns in watched_namespaces(namespace, watch)
        ),
    ]


def namespace_rules() -> list[Rule]:
    return [
        # The leader Lease, or with `--shards` the shard Leases and each replica's heartbeat (ADR 0067),
        # whose names depend on the shard count and the replica: only here, in its own namespace.
        Rule("coordination.k8s.io", ("leases",), ("create", "get", "list", "update", "patch", "delete")),
        # Immutable content snapshots (`fw-content-<hash>`), created once and never rewritten; those
        # nothing names are collected by deleting their ConfigMap. A Secret snapshot is owned by an
        # anchor ConfigMap, which the garbage collector follows: no right to delete a Secret (ADR 0084).
        Rule("", ("configmaps",), ("create", "delete")),
        Rule("", ("secrets",), ("create",)),
    ]


def documents(namespace: str, watch: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """Namespace, ServiceAccount, ClusterRole + binding, Role + binding in `namespace`; with `watch`
    (the controller's `--watch-namespace`), the namespaced rules only in those namespaces."""
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": NAME, "namespace": namespace}},
        *_scoped(NAME, namespace, cluster_rules(), watch),
        _role(NAME, namespace, namespace_rules()),
        _binding(NAME, namespace, "Role", NAME, namespace),
    ]


def watched_namespaces(namespace: str, watch: tuple[str, ...]) -> list[str]:
    """Where the namespaced rules are bound: the watched namespaces and the controller's own."""
    return sorted({*watch, namespace})


def _scoped(name: str, namespace: str, rules: list[Rule], watch: tuple[str, ...]) -> list[dict[str, Any]]:
    """`rules` granted cluster-wide, or with `watch` their namespaced part as a ClusterRole
    `<name>-watched` bound by a RoleBinding in each watched namespace (a RoleBinding to a ClusterRole
    grants it in that namespace only)."""
    if not watch:
        return [_cluster_role(name, rules), _binding(name, namespace, "ClusterRole", name)]
    cluster, namespaced = split(rules)
    watched = f"{name}-watched"
    return [
        _cluster_role(name, cluster),
        _binding(name, namespace, "ClusterRole", name),
        _cluster_role(watched, namespaced),
        *(
            _binding(watched, namespace, "ClusterRole", watched, ns)
            for ns in watched_namespaces(namespace, watch)
        ),
    ]


def _cluster_role(name: str, rules: list[Rule]) -> dict[str, Any]:
    return {
        "apiVersion": RBAC_API,
        "kind": "ClusterRole",
        "metadata": {"name": name},
        "rules": [r.manifest() for r in rules],
    }


def _role(name: str, namespace: str, rules: list[Rule]) -> dict[str, Any]:
    return {
        "apiVersion": RBAC_API,
        "kind": "Role",
        "metadata": {"name": name, "namespace": namespace},
        "rules": [r.manifest() for r in rules],
    }


def _binding(
    name: str, namespace: str, role_kind: str, role: str, where: str | None = None
) -> dict[str, Any]:
    """A binding of the controller's ServiceAccount (in `namespace`) to `role`: cluster-wide, or a
    RoleBinding in `where`."""
    meta: dict[str, Any] = {"name": name}
    if where is not None:
        meta["namespace"] = where
    return {
        "apiVersion": RBAC_API,
        "kind": "ClusterRoleBinding" if where is None else "RoleBinding",
        "metadata": meta,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": namespace}],
    }

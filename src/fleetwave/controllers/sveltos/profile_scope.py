"""A namespaced Profile compiled into the ClusterProfile that delivers it (pure; ADR 0110).

A Profile is a ClusterProfile confined to its namespace: it selects only member clusters of that
namespace and reads content (ConfigMaps, Secrets, Flux sources) only from there. fleetwave delivers
it through one generated cluster-scoped ClusterProfile, `p--<namespace>.<name>`, so there is one
delivery path; this module decides that profile's body, or why the Profile is refused:

- selection: the Profile's clusterSelector is ANDed with the member's namespace label
  (`translate.NAMESPACE_LABEL`, set on every member by the fleet builder); clusterRefs default to the
  Profile's namespace and a reference to another namespace is refused; setRefs name Sets of the
  Profile's namespace, whose chosen clusters become clusterRefs of the generated profile.
- content: every `namespace` of a reference to management-cluster content defaults to the Profile's
  namespace; any other value is refused, naming the field. The walk is fail-closed: every
  `namespace` key of the spec is content-side unless it lies under a part that names objects on the
  member (health checks, patches, drift exclusions, helm options).
- `deploymentType: Local` (the management cluster) is refused: a tenant never writes there.
- dependsOn names Profiles of the same namespace, so it becomes their generated names.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from fleetwave.controllers.fleet import tenancy
from fleetwave.translate import NAMESPACE_LABEL

PREFIX = "p--"
# On the generated ClusterProfile: the Profile's namespace (a label, to find a namespace's profiles
# and to confine its content boundary) and `namespace/name` (an annotation: names may pass 63 chars).
PROFILE_NAMESPACE_LABEL = "fleetwave.io/profile-namespace"
PROFILE_ANNOTATION = "fleetwave.io/profile"
# Sveltos' label on the ClusterSummaries of a Profile: its name.
SVELTOS_PROFILE_NAME_LABEL = "projectsveltos.io/profile-name"
MAX_NAME = 63  # the generated name is also a label value (its summaries' profile label)

# Parts of a profile spec whose namespaces are on the member cluster, not content in the management
# cluster: a tenant may name any there (what it may deploy on a member is not confined, ADR 0110).
_MEMBER_SIDE = frozenset(
    {
        "validateHealths",
        "preDeployChecks",
        "preDeleteChecks",
        "postDeleteChecks",
        "patches",
        "driftExclusions",
        "options",
    }
)
# References whose empty namespace is the Profile's own (Sveltos: "the Profile namespace is used").
_REF_LISTS = ("policyRefs", "kustomizationRefs", "patchesFrom")


class Refused(ValueError):
    """The Profile cannot be delivered; the message names the field."""


@dataclass(frozen=True, slots=True)
class Generated:
    """The ClusterProfile that delivers one Profile."""

    name: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    spec: Mapping[str, Any]


def generated_name(namespace: str, name: str) -> str:
    """`p--<namespace>.<name>`: unique because a namespace has no dot; past 63 characters, a
    readable head and a digest of both."""
    full = f"{PREFIX}{namespace}.{name}"
    if len(full) <= MAX_NAME:
        return full
    digest = hashlib.sha256(f"{namespace}/{name}".encode()).hexdigest()[:16]
    head = f"{namespace}.{name}"[:40].rstrip(".-")
    return f"{PREFIX}{head}-{digest}"


def owner_of(cluster_profile: Mapping[str, Any]) -> tuple[str, str] | None:
    """The (namespace, name) of the Profile a ClusterProfile was generated for; None for any other."""
    meta = cluster_profile.get("metadata") or {}
    namespace = (meta.get("labels") or {}).get(PROFILE_NAMESPACE_LABEL)
    owner = str((meta.get("annotations") or {}).get(PROFILE_ANNOTATION) or "")
    ns, _, name = owner.partition("/")
    if not namespace or ns != namespace or not name:
        return None
    return ns, name


def generate(
    namespace: str,
    name: str,
    spec: Mapping[str, Any],
    labels: Mapping[str, str] | None = None,
    tenants: tuple[str, ...] = (),
    set_clusters: Iterable[str] = (),
) -> Generated:
    """The generated ClusterProfile of Profile `namespace/name` whose spec (as JSON, by alias) is
    `spec` and whose labels are `labels`; Refused names the first field that would leave the
    namespace. `tenants`: the ServiceAccounts of this namespace RoleRequests grant rules to (ADR
    0111) — a namespace with any is a tenant's, and its Profiles deliver only as one of them."""
    return Generated(
        name=generated_name(namespace, name),
        labels={**_tenant(namespace, labels, tenants), PROFILE_NAMESPACE_LABEL: namespace},
        annotations={PROFILE_ANNOTATION: f"{namespace}/{name}"},
        spec=confine(namespace, spec, set_clusters),
    )


def _tenant(namespace: str, labels: Mapping[str, str] | None, tenants: tuple[str, ...]) -> dict[str, str]:
    """The tenant-admin labels the generated profile carries: the Profile's own (a ServiceAccount of
    its namespace), else the namespace's one tenant admin; none where no RoleRequest names one."""
    admin = tenancy.admin_of(labels)
    if isinstance(admin, str):
        raise Refused(f"metadata.labels: {admin}")
    if admin is None and tenants:
        if len(tenants) > 1:
            raise Refused(
                f"metadata.labels[{tenancy.SA_NAME_LABEL}]: RoleRequests grant several tenant admins of "
                f"namespace {namespace} ({', '.join(tenants)}): name the one this Profile acts as"
            )
        return {tenancy.SA_NAME_LABEL: tenants[0], tenancy.SA_NAMESPACE_LABEL: namespace}
    if admin is not None and admin.namespace != namespace:
        raise Refused(
            f"metadata.labels[{tenancy.SA_NAMESPACE_LABEL}]: {admin.namespace}: a Profile acts only as a "
            f"ServiceAccount of its own namespace ({namespace})"
        )
    return tenancy.tenant_labels(labels)


def confine(namespace: str, spec: Mapping[str, Any], set_clusters: Iterable[str] = ()) -> dict[str, Any]:
    """`spec` with its selection and its content references held to `namespace` (pure).
    `set_clusters`: the member keys the Sets its setRefs name (Sets of this namespace) have chosen;
    they join its clusterRefs, so the generated profile selects them with the rest (ADR 0108)."""
    spec = _sets_as_refs(namespace, spec, set_clusters)
    out = _content(namespace, dict(spec))
    _no_foreign_namespace(namespace, out, "spec")
    _no_local(out)
    out["clusterRefs"] = _cluster_refs(namespace, out.get("clusterRefs"))
    if not out["clusterRefs"]:
        del out["clusterRefs"]
    selector = _selector(namespace, out.get("clusterSelector"))
    if selector is None:
        out.pop("clusterSelector", None)
    else:
        out["clusterSelector"] = selector
    if out.get("dependsOn"):
        out["dependsOn"] = [generated_name(namespace, str(d)) for d in out["dependsOn"]]
    return out


def _sets_as_refs(namespace: str, spec: Mapping[str, Any], set_clusters: Iterable[str]) -> dict[str, Any]:
    out = {k: v for k, v in spec.items() if k != "setRefs"}
    if not spec.get("setRefs"):
        return out
    chosen = [k.partition("/") for k in sorted(set_clusters)]
    refs = [{"namespace": ns, "name": n} for ns, _, n in chosen if ns == namespace]
    if refs:
        out["clusterRefs"] = [*(spec.get("clusterRefs") or []), *refs]
    return out


def _selector(namespace: str, given: Any) -> dict[str, Any] | None:
    """The Profile's selector ANDed with its namespace; an empty one still selects nothing."""
    if not isinstance(given, Mapping) or not (given.get("matchLabels") or given.get("matchExpressions")):
        return None
    mine = {"key": NAMESPACE_LABEL, "operator": "In", "values": [namespace]}
    return {**given, "matchExpressions": [*(given.get("matchExpressions") or []), mine]}


def _cluster_refs(namespace: str, refs: Any) -> list[dict[str, Any]]:
    out = []
    for i, ref in enumerate(refs or []):
        given = ref.get("namespace") or namespace
        if given != namespace:
            raise Refused(
                f"spec.clusterRefs[{i}].namespace: {given}: a Profile selects only clusters of its "
                f"own namespace ({namespace})"
            )
        out.append({**ref, "namespace": namespace})
    return out


def _content(namespace: str, spec: dict[str, Any]) -> dict[str, Any]:
    """Content references without a namespace get the Profile's."""
    for field in _REF_LISTS:
        if spec.get(field):
            spec[field] = [_defaulted(namespace, r) for r in spec[field]]
    for key in ("helmCharts", "kustomizationRefs"):
        if spec.get(key):
            spec[key] = [_with_values_from(namespace, item) for item in spec[key]]
    if spec.get("templateResourceRefs"):
        spec["templateResourceRefs"] = [
            {**r, "resource": _defaulted(namespace, r.get("resource") or {})}
            for r in spec["templateResourceRefs"]
        ]
    if spec.get("helmCharts"):
        spec["helmCharts"] = [_with_credentials(namespace, c) for c in spec["helmCharts"]]
    return spec


def _defaulted(namespace: str, ref: Mapping[str, Any]) -> dict[str, Any]:
    return {**ref, "namespace": ref.get("namespace") or namespace}


def _with_values_from(namespace: str, item: Mapping[str, Any]) -> dict[str, Any]:
    if not item.get("valuesFrom"):
        return dict(item)
    return {**item, "valuesFrom": [_defaulted(namespace, v) for v in item["valuesFrom"]]}


def _with_credentials(namespace: str, chart: Mapping[str, Any]) -> dict[str, Any]:
    config = chart.get("registryCredentialsConfig")
    if not isinstance(config, Mapping):
        return dict(chart)
    refs = {k: _defaulted(namespace, v) for k, v in config.items() if k in ("credentials", "ca")}
    return {**chart, "registryCredentialsConfig": {**config, **refs}}


def _no_foreign_namespace(namespace: str, spec: Mapping[str, Any], path: str) -> None:
    """Fail-closed: every `namespace` outside the member-side parts must be the Profile's. A walk
    with its own stack: free-form parts may nest deeper than Python's recursion allows."""
    stack: list[tuple[str, Any]] = [
        (f"{path}.{k}", v)
        for k, v in spec.items()
        if k not in _MEMBER_SIDE and k not in ("clusterRefs", "clusterSelector")
    ]
    while stack:
        where, value = stack.pop()
        if isinstance(value, Mapping):
            for key, item in value.items():
                if key == "namespace" and item != namespace:
                    raise Refused(
                        f"{where}.{key}: {item}: a Profile reads content only from its own namespace "
                        f"({namespace})"
                    )
                if key not in _MEMBER_SIDE:
                    stack.append((f"{where}.{key}", item))
        elif isinstance(value, list):
            stack.extend((f"{where}[{i}]", item) for i, item in enumerate(value))


def _no_local(spec: Mapping[str, Any]) -> None:
    for field in ("policyRefs", "kustomizationRefs"):
        for i, ref in enumerate(spec.get(field) or []):
            if ref.get("deploymentType") == "Local":
                raise Refused(
                    f"spec.{field}[{i}].deploymentType: Local deploys to the management cluster, "
                    "which a Profile never does"
                )

"""Shared pieces of both translators: label selectors, canonical hashing, durations."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from datetime import timedelta

from fleetwave.api import groups
from fleetwave.api.analyses import AnalysisGate
from fleetwave.api.meta import FailureBudget, LabelSelector, parse_duration
from fleetwave.api.webhooks import WebhookGate
from fleetwave.core import model as m

# Set on every cluster by the fleet builders so a ClusterProfile's clusterRefs (cluster names) can be
# expressed as an ordinary selector; the engine only knows label selectors.
NAME_LABEL = "fleetwave.io/cluster-name"
# And `namespace/name`, the member's key: a clusterRef that names a namespace matches only there, so
# `dev/c1` never selects `prod/c1`. Clusters of a fleet file have no namespace: theirs is `default`.
KEY_LABEL = "fleetwave.io/cluster-key"
# And its namespace alone: a namespaced Profile's generated ClusterProfile ANDs it into its selector,
# so it never selects a cluster of another namespace (ADR 0110).
NAMESPACE_LABEL = "fleetwave.io/cluster-namespace"
# And the kind the cluster is known by (ADR 0109): `Cluster` for a Cluster API cluster, otherwise the
# kind its API family registers members as (`SveltosCluster`, `MemberCluster`). Selectable like any
# label: `fleetwave.io/cluster-kind: Cluster` picks the Cluster API clusters alone.
KIND_LABEL = "fleetwave.io/cluster-kind"
DEFAULT_NAMESPACE = "default"

# A Cluster API cluster (cluster.x-k8s.io `Cluster`) is keyed `capi:namespace/name` (ADR 0109): a
# namespace's name never holds a ':', so no registered member's `namespace/name` is ever read as one,
# and a SveltosCluster dev/c1 and a Cluster dev/c1, which commonly coexist, stay two clusters.
CAPI_KEY_PREFIX = "capi:"
CAPI_GROUP, CAPI_KIND = groups.CAPI_GROUP, groups.CAPI_KIND
# The kinds a clusterRef may name, each with the API groups it may be written with (an empty
# apiVersion is fine): a registered member by any family's name for it, a Cluster API cluster by its own.
_REF_GROUPS = {
    "SveltosCluster": ("lib.projectsveltos.io",),
    "MemberCluster": ("fleetwave.io", "cluster.kubernetes-fleet.io"),
    CAPI_KIND: (CAPI_GROUP,),
}


def canonical_json(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def digest(value: object) -> str:
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()


def selector(sel: LabelSelector) -> m.Selector:
    labels = tuple(sorted((sel.match_labels or {}).items()))
    exprs = tuple(
        m.Requirement(r.key, m.Operator(r.operator), tuple(r.values or ()))
        for r in sel.match_expressions or []
    )
    return m.Selector(match_labels=labels, match_expressions=exprs)


def is_empty(sel: LabelSelector | None) -> bool:
    return sel is None or (not sel.match_labels and not sel.match_expressions)


def names_selector(names: tuple[str, ...]) -> m.Selector:
    return m.Selector(match_expressions=(m.Requirement(NAME_LABEL, m.Operator.IN, tuple(sorted(names))),))


def keys_selector(keys: tuple[str, ...]) -> m.Selector:
    """The clusters with these keys (`namespace/name`, `capi:namespace/name`), and no other."""
    return m.Selector(match_expressions=(m.Requirement(KEY_LABEL, m.Operator.IN, tuple(sorted(keys))),))


def cluster_key(namespace: str | None, name: str, *, capi: bool = False) -> str:
    """A member's key: `namespace/name`, or `capi:namespace/name` for a Cluster API cluster."""
    key = f"{namespace or DEFAULT_NAMESPACE}/{name}"
    return f"{CAPI_KEY_PREFIX}{key}" if capi else key


def split_key(key: str) -> tuple[bool, str, str]:
    """(whether it is a Cluster API cluster, namespace, name) of a member's key."""
    capi = key.startswith(CAPI_KEY_PREFIX)
    namespace, _, name = key.removeprefix(CAPI_KEY_PREFIX).partition("/")
    return capi, namespace, name


class RefProblem(ValueError):
    """A clusterRef that names no kind of cluster; `field` is the ref's field at fault."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def ref_key(api_version: str | None, kind: str | None, namespace: str | None, name: str) -> str:
    """The key of the cluster a clusterRef names. Its kind decides: `Cluster` is a Cluster API
    cluster, `SveltosCluster` or `MemberCluster` a registered member; without a kind, its apiVersion's
    group does (Sveltos reads a ref's group), and a ref without either is a registered member, as
    upstream. RefProblem for any other kind, or a group not the kind's."""
    group = (api_version or "").rpartition("/")[0]
    if api_version and not group:
        raise RefProblem("apiVersion", f"{api_version} is not the group/version of a kind of cluster")
    if not kind:
        if group and not any(group in groups for groups in _REF_GROUPS.values()):
            raise RefProblem("apiVersion", f"{group} serves no kind of cluster")
        return cluster_key(namespace, name, capi=group == CAPI_GROUP)
    groups = _REF_GROUPS.get(kind)
    if groups is None:
        allowed = ", ".join(sorted(_REF_GROUPS))
        raise RefProblem("kind", f"{kind} is not a kind of cluster (expected one of {allowed})")
    if group and group not in groups:
        raise RefProblem("apiVersion", f"{kind} is served by {' or '.join(groups)}, not {group}")
    return cluster_key(namespace, name, capi=kind == CAPI_KIND)


def union(by_label: m.Selector | None, keys: Iterable[str]) -> m.Selection | None:
    """The clusters `by_label` matches and those with these member keys (Sveltos' clusterSelector,
    clusterRefs and cluster sets together). One part alone is that part as it is, so a profile
    without the other keeps its selector (and its rollout's stages hash) unchanged."""
    named = tuple(sorted(set(keys)))
    by_key = keys_selector(named) if named else None
    if by_label is None:
        return by_key
    return by_label if by_key is None else m.AnyOf((by_label, by_key))


def duration(raw: str | None) -> timedelta | None:
    """A Go duration; None or zero means "no wait", so no gate is emitted for it."""
    if raw is None:
        return None
    value = parse_duration(raw)
    return value if value > timedelta(0) else None


def describe_selector(sel: m.Selection | None) -> str:
    """Short human form for messages: `env=prod, tier In (a,b)`; a union as `(...) or (...)`."""
    if sel is None:
        return "<empty>"
    if isinstance(sel, m.AnyOf):
        return " or ".join(f"({describe_selector(s)})" for s in sel.selectors)
    parts = [f"{k}={v}" for k, v in sel.match_labels]
    for r in sel.match_expressions:
        values = f" ({','.join(r.values)})" if r.values else ""
        parts.append(f"{r.key} {r.operator}{values}")
    return ", ".join(parts) or "<all clusters>"


def failure_budget(given: FailureBudget | None, on_failure: str = "Halt") -> m.FailureBudget | None:
    """The API's failureBudget (promotions, staged update strategies) as the engine's (ADR 0076).
    Rolling back on failure needs failures to be judged: without a budget, none may fail (ADR 0078)."""
    if given is None:
        return m.FailureBudget() if on_failure == "Rollback" else None
    grace = duration(given.grace_period)
    return m.FailureBudget(
        per_stage=None
        if given.max_failed_per_stage is None
        else m.FailureLimit.parse(given.max_failed_per_stage),
        total=None if given.max_failed is None else m.FailureLimit.parse(given.max_failed),
        grace=grace if grace is not None else m.FailureBudget().grace,
    )


def webhook_gates(webhooks: list[WebhookGate] | None) -> tuple[m.Gate, ...]:
    """One engine gate per webhook of a stage (ADR 0080); the shell makes the calls."""
    return tuple(m.Webhook(w.name, w.per_cluster) for w in webhooks or ())


def analysis_gates(analyses: list[AnalysisGate] | None) -> tuple[m.Gate, ...]:
    """One engine gate per analysis of a stage (ADR 0081); the shell takes the measurements."""
    return tuple(
        m.Analysis(a.name, a.count, a.failure_limit, parse_duration(a.interval), a.per_cluster)
        for a in analyses or ()
    )

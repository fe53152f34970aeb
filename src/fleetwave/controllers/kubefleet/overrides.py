"""Overrides as the placement and run controllers use them: read from snapshots, per cluster.

ClusterResourceOverride and ResourceOverride objects are snapshotted (`override_snapshots`); the
controllers only read snapshots, so what a cluster gets is always an immutable, named revision. A
RollingUpdate placement uses the latest snapshot of every override that still exists; a staged run
pins, per cluster, the snapshots that applied when it initialized. `PerCluster` is what a delivery
asks: which overrides for this cluster, the hash of what it gets, and the objects themselves
(`fleetwave.core.overrides` does the work).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fleetwave.api import codec
from fleetwave.api.meta import LabelSelector
from fleetwave.api.objects import Obj
from fleetwave.api.overrides import (
    ClusterResourceOverrideSnapshot,
    OverrideRule,
    ResourceOverrideSnapshot,
)
from fleetwave.controllers.kubefleet import naming as nm
from fleetwave.core import model as m
from fleetwave.core import overrides as co
from fleetwave.kube import kinds
from fleetwave.translate import KEY_LABEL, NAME_LABEL, NAMESPACE_LABEL
from fleetwave.translate.common import selector

CLUSTER_KIND, RESOURCE_KIND = "ClusterResourceOverride", "ResourceOverride"
SNAPSHOT_KIND = {
    CLUSTER_KIND: "ClusterResourceOverrideSnapshot",
    RESOURCE_KIND: "ResourceOverrideSnapshot",
}
INDEX_LABEL = nm.PREFIX + "override-index"
PARENT_LABEL = nm.PREFIX + "parent-resource-override"


def index_of(snapshot: Obj) -> int | None:
    raw = ((snapshot.get("metadata") or {}).get("labels") or {}).get(INDEX_LABEL)
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


def parent_of(snapshot: Obj) -> str | None:
    return ((snapshot.get("metadata") or {}).get("labels") or {}).get(PARENT_LABEL)


# --- snapshots -> core --------------------------------------------------------------------------------


def _rule(rule: OverrideRule) -> co.Rule:
    terms: tuple[m.Selector | None, ...] | None = None
    if rule.cluster_selector is not None:
        terms = tuple(_term(t.label_selector) for t in rule.cluster_selector.cluster_selector_terms)
    patches = tuple(co.Patch(p.op, p.path, p.value) for p in rule.json_patch_overrides or ())
    return co.Rule(terms, rule.override_type == "Delete", patches)


def _term(label_selector: LabelSelector | None) -> m.Selector | None:
    return None if label_selector is None else selector(label_selector)  # no labelSelector: no cluster


def to_core(kind: str, snapshot: Obj) -> co.Override | None:
    """A snapshot (native form) as the core sees it; None when it does not parse (hand-made)."""
    body = {**snapshot, "apiVersion": f"{kinds.GROUP}/{kinds.VERSION}", "kind": SNAPSHOT_KIND[kind]}
    try:
        parsed = codec.parse_object(body)
    except codec.ManifestError:
        return None
    meta = snapshot.get("metadata") or {}
    namespace = meta.get("namespace") if kind == RESOURCE_KIND else None
    if isinstance(parsed, ClusterResourceOverrideSnapshot):
        spec: Any = parsed.spec.override_spec
        selected = spec.cluster_resource_selectors
    elif isinstance(parsed, ResourceOverrideSnapshot):
        spec = parsed.spec.override_spec
        selected = spec.resource_selectors
    else:
        return None
    targets = tuple(co.Target(s.group, s.version, s.kind, s.name, namespace) for s in selected)
    ref = spec.placement
    return co.Override(
        name=str(meta.get("name")),
        namespace=namespace,
        digest=str(parsed.spec.override_hash),
        targets=targets,
        rules=tuple(_rule(r) for r in spec.policy.override_rules),
        placement=co.PlacementRef(ref.name, ref.scope) if ref else None,
    )


def latest(lookup: Any) -> list[co.Override]:
    """The newest snapshot of every override that exists (`lookup`: the controllers' cache): the
    snapshots of a deleted override are ignored even before they are gone."""
    out: list[co.Override] = []
    for kind, snapshot_kind in SNAPSHOT_KIND.items():
        newest: dict[tuple[str | None, str], tuple[int, Obj]] = {}
        for snap in lookup.list(snapshot_kind):
            parent, index = parent_of(snap), index_of(snap)
            namespace = (snap.get("metadata") or {}).get("namespace")
            if parent is None or index is None:
                continue
            if (namespace, parent) not in newest or newest[(namespace, parent)][0] < index:
                newest[(namespace, parent)] = (index, snap)
        for (namespace, parent), (_, snap) in sorted(newest.items(), key=lambda i: (i[0][0] or "", i[0][1])):
            if lookup.get(kind, namespace, parent) is None:
                continue
            found = to_core(kind, snap)
            if found is not None:
                out.append(found)
    return out


def member(cluster: m.Cluster) -> co.Member:
    labels = {k: v for k, v in cluster.labels.items() if k not in (NAME_LABEL, KEY_LABEL, NAMESPACE_LABEL)}
    return co.Member(str(cluster.labels.get(NAME_LABEL) or cluster.name.rpartition("/")[2]), labels)


# --- per cluster ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PerCluster:
    """Which overrides each cluster gets. `pinned` (a staged run's, by cluster key) wins over
    `every` (the candidates for clusters without a pin); `missing` holds why a pinned snapshot
    cannot be used (deleted), which fails that cluster rather than deliver it without."""

    every: tuple[co.Override, ...] = ()
    members: Mapping[str, co.Member] = field(default_factory=dict)
    pinned: Mapping[str, tuple[co.Override, ...]] = field(default_factory=dict)
    missing: Mapping[str, str] = field(default_factory=dict)

    def of(self, cluster: str) -> tuple[co.Override, ...]:
        return self.pinned.get(cluster, self.every)

    def member(self, cluster: str) -> co.Member:
        return self.members.get(cluster) or co.Member(cluster.rpartition("/")[2], {})

    def digest(self, content_hash: str, cluster: str) -> str:
        if not self.every and not self.pinned:
            return content_hash
        return co.digest(content_hash, self.of(cluster), self.member(cluster))

    def render(self, cluster: str, objects: Sequence[Obj]) -> co.Rendered:
        """Raises co.OverrideError."""
        if cluster in self.missing:
            raise co.OverrideError(self.missing[cluster])
        if not self.every and not self.pinned:
            return co.Rendered(tuple(dict(o) for o in objects))
        return co.render(self.of(cluster), self.member(cluster), objects)


NONE = PerCluster()


def members_of(fleet: m.Fleet) -> dict[str, co.Member]:
    return {key: member(c) for key, c in fleet.by_name.items()}


def for_placement(
    lookup: Any, objects: Sequence[Obj], placement: str, namespace: str | None, fleet: m.Fleet
) -> PerCluster:
    """What a RollingUpdate placement delivers with: the latest snapshots that may touch it."""
    every = co.for_placement(latest(lookup), objects, placement, namespace)
    return PerCluster(every, members_of(fleet)) if every else NONE


# --- a staged run's pins -------------------------------------------------------------------------------


def pins(per: PerCluster, clusters: Iterable[str]) -> dict[str, dict[str, Any]]:
    """What a run records at initialization: per cluster, the snapshots that apply there (upstream's
    ClusterUpdatingStatus fields), and the candidates for clusters that join later."""
    out: dict[str, dict[str, Any]] = {}
    for cluster in sorted(clusters):
        mine = co.applicable(per.every, per.member(cluster))
        out[cluster] = listed(mine)
    return {"clusters": out, "candidates": listed(per.every)}


def listed(overrides: Iterable[co.Override]) -> dict[str, Any]:
    given = tuple(overrides)
    return {
        "clusterResourceOverrideSnapshots": [o.name for o in given if o.namespace is None],
        "resourceOverrideSnapshots": [
            {"name": o.name, "namespace": o.namespace} for o in given if o.namespace is not None
        ],
    }


def pinned(lookup: Any, raw: Mapping[str, Any] | None, fleet: m.Fleet) -> PerCluster:
    """A run's recorded pins, read back into snapshots from the cache."""
    if not raw:
        return NONE
    found: dict[tuple[str | None, str], co.Override] = {}

    def resolve(entry: Mapping[str, Any]) -> tuple[tuple[co.Override, ...], list[str]]:
        got, lost = [], []
        wanted: list[tuple[str, str | None, str]] = [
            (CLUSTER_KIND, None, str(n)) for n in entry.get("clusterResourceOverrideSnapshots") or ()
        ]
        wanted += [
            (RESOURCE_KIND, str(r.get("namespace")), str(r.get("name")))
            for r in entry.get("resourceOverrideSnapshots") or ()
            if isinstance(r, Mapping)
        ]
        for kind, namespace, name in wanted:
            key = (namespace, name)
            if key not in found:
                snap = lookup.get(SNAPSHOT_KIND[kind], namespace, name)
                override = to_core(kind, snap) if snap is not None else None
                if override is None:
                    lost.append(f"{namespace}/{name}" if namespace else name)
                    continue
                found[key] = override
            got.append(found[key])
        return tuple(got), lost

    every, lost_every = resolve(raw.get("candidates") or {})
    pinned_clusters: dict[str, tuple[co.Override, ...]] = {}
    missing: dict[str, str] = {}
    for cluster, entry in (raw.get("clusters") or {}).items():
        if not isinstance(entry, Mapping):
            continue
        pinned_clusters[str(cluster)], lost = resolve(entry)
        if lost:
            missing[str(cluster)] = f"override snapshots {', '.join(lost)} pinned by the run were deleted"
    for cluster in fleet.names - set(pinned_clusters):
        if lost_every:
            missing[cluster] = f"override snapshots {', '.join(lost_every)} pinned by the run were deleted"
    if not every and not any(pinned_clusters.values()) and not missing:
        return NONE
    return PerCluster(every, members_of(fleet), pinned_clusters, missing)

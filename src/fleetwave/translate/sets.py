"""Cluster sets (ClusterSet, Set; ADR 0108) for the controllers and translators. Pure.

- `matching`: which members a set matches, and whether each is ready: what `core.cluster_sets`
  chooses from.
- `chosen`: the members a set object's status says it has chosen.
- `clusters_of_sets`: the set resolution of a profile's `setRefs`: set names and the sets' objects
  in, the member keys they have chosen out. A ClusterProfile resolves ClusterSets with it; a
  namespaced Profile resolves the Sets of its own namespace the same way.

Members are named by their key, `namespace/name` (`common.cluster_key`), as everywhere else.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from typing import Any

from fleetwave.api.sets import SetSpec
from fleetwave.core import model as m
from fleetwave.core import selectors
from fleetwave.translate import common

# At most this many references are read from one set's status: the status is the controller's, but
# a person with rights on the status subresource can write anything there.
MAX_CHOSEN = 10_000


def matching(spec: SetSpec, namespace: str | None, fleet: m.Fleet) -> dict[str, bool]:
    """Every member the set matches (its clusterSelector or its clusterRefs) -> whether it is ready.
    `namespace`: a Set's, whose members and references are all of that namespace (Sveltos rewrites
    a Set's references to its own namespace); None for a ClusterSet. A reference names its cluster
    by kind, as a profile's do (`kind: Cluster` is a Cluster API cluster, ADR 0109); one naming no
    kind of cluster matches nothing (`ref_problems` says why). An empty or absent clusterSelector
    matches no cluster by label, as for profiles."""
    named = set(_ref_keys(spec, namespace))
    sel = spec.cluster_selector
    by_label = None if sel is None or common.is_empty(sel) else common.selector(sel)
    return {
        key: cluster.ready
        for key, cluster in fleet.by_name.items()
        if (namespace is None or common.split_key(key)[1] == namespace)
        and (key in named or selectors.matches(by_label, cluster.labels))
    }


def ref_problems(spec: SetSpec) -> list[str]:
    """What is wrong with each clusterRef that names no kind of cluster, by field."""
    problems = []
    for i, ref in enumerate(spec.cluster_refs or ()):
        try:
            common.ref_key(ref.api_version, ref.kind, ref.namespace, ref.name or "")
        except common.RefProblem as e:
            problems.append(f"spec.clusterRefs[{i}].{e.field}: {e.message}")
    return problems


def _ref_keys(spec: SetSpec, namespace: str | None) -> list[str]:
    keys = []
    for ref in spec.cluster_refs or ():
        if ref.name:
            with contextlib.suppress(common.RefProblem):
                keys.append(common.ref_key(ref.api_version, ref.kind, namespace or ref.namespace, ref.name))
    return keys


def chosen(obj: Mapping[str, Any] | None) -> tuple[str, ...]:
    """The member keys a set's `status.selectedClusterRefs` names, in its order, by kind (a Cluster
    API cluster's ref has `kind: Cluster`); a reference without a namespace is to one of the set's own
    namespace (a ClusterSet's: `default`). Malformed entries are skipped."""
    if not isinstance(obj, Mapping):
        return ()
    meta, status = obj.get("metadata"), obj.get("status")
    own = meta.get("namespace") if isinstance(meta, Mapping) else None
    refs = status.get("selectedClusterRefs") if isinstance(status, Mapping) else None
    if not isinstance(refs, list):
        return ()
    keys: list[str] = []
    for ref in refs[:MAX_CHOSEN]:
        key = _chosen_key(ref, own)
        if key:
            keys.append(key)
    return tuple(dict.fromkeys(keys))


def _chosen_key(ref: object, own: object) -> str:
    """The member key of one `selectedClusterRefs` entry, by kind; "" for a malformed one."""
    if not isinstance(ref, Mapping):
        return ""
    name, namespace = ref.get("name"), ref.get("namespace")
    api_version, kind = ref.get("apiVersion"), ref.get("kind")
    if not isinstance(name, str) or not name:
        return ""
    namespace = namespace if isinstance(namespace, str) else own if isinstance(own, str) else None
    try:
        return common.ref_key(
            api_version if isinstance(api_version, str) else None,
            kind if isinstance(kind, str) else None,
            namespace,
            name,
        )
    except common.RefProblem:
        return ""


def clusters_of_sets(names: Iterable[str], sets: Mapping[str, Mapping[str, Any] | None]) -> frozenset[str]:
    """The member keys the named sets have chosen, together. `sets`: each set's object by name (as
    the caller found it: a ClusterProfile's ClusterSets, a namespaced profile's Sets of its own
    namespace); a set that is missing chooses nothing, as in Sveltos."""
    return frozenset(key for name in names for key in chosen(sets.get(name)))

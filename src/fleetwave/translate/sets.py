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
    a Set's references to its own namespace); None for a ClusterSet. An empty or absent
    clusterSelector matches no cluster by label, as for profiles."""
    named = {
        common.cluster_key(namespace or ref.namespace, ref.name)
        for ref in spec.cluster_refs or ()
        if ref.name
    }
    sel = spec.cluster_selector
    by_label = None if sel is None or common.is_empty(sel) else common.selector(sel)
    prefix = f"{namespace}/" if namespace is not None else ""
    return {
        key: cluster.ready
        for key, cluster in fleet.by_name.items()
        if key.startswith(prefix) and (key in named or selectors.matches(by_label, cluster.labels))
    }


def chosen(obj: Mapping[str, Any] | None) -> tuple[str, ...]:
    """The member keys a set's `status.selectedClusterRefs` names, in its order; a reference without
    a namespace is to one of the set's own namespace (a ClusterSet's: `default`). Malformed entries
    are skipped."""
    if not isinstance(obj, Mapping):
        return ()
    meta, status = obj.get("metadata"), obj.get("status")
    own = meta.get("namespace") if isinstance(meta, Mapping) else None
    refs = status.get("selectedClusterRefs") if isinstance(status, Mapping) else None
    if not isinstance(refs, list):
        return ()
    keys: list[str] = []
    for ref in refs[:MAX_CHOSEN]:
        name = ref.get("name") if isinstance(ref, Mapping) else None
        namespace = ref.get("namespace") if isinstance(ref, Mapping) else None
        if isinstance(name, str) and name:
            keys.append(common.cluster_key(namespace if isinstance(namespace, str) else own, name))
    return tuple(dict.fromkeys(keys))


def clusters_of_sets(names: Iterable[str], sets: Mapping[str, Mapping[str, Any] | None]) -> frozenset[str]:
    """The member keys the named sets have chosen, together. `sets`: each set's object by name (as
    the caller found it: a ClusterProfile's ClusterSets, a namespaced profile's Sets of its own
    namespace); a set that is missing chooses nothing, as in Sveltos."""
    return frozenset(key for name in names for key in chosen(sets.get(name)))

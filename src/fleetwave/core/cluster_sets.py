"""What a cluster set chooses (Sveltos' ClusterSet and Set, ADR 0108): up to `maxReplicas` of the
clusters that match it and are ready, keeping the ones it chose before.

Pure: the shell says which clusters match the set and whether each is ready, and what the set chose
last time; `select` says what it chooses now. A chosen cluster that still matches and is ready is
never replaced, so a set moves only when a cluster it chose stops being usable (not ready, gone, no
longer matching), and it does not move back by itself when that cluster is ready again: an
active/passive pair fails over once, not twice.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping


def select(max_replicas: int, matching: Mapping[str, bool], current: Iterable[str]) -> tuple[str, ...]:
    """The clusters chosen now (member keys, sorted). `matching`: every cluster that matches the set,
    and whether it is ready; `current`: what the set chose last time.

    First the clusters of `current` that still match and are ready (when maxReplicas was lowered,
    the first of them in key order stay); then ready matching clusters in key order until there are
    `max_replicas`. Key order is what upstream's list order amounts to, and it is the same on every
    pass: two controllers deciding from the same facts choose the same clusters."""
    if max_replicas <= 0:
        return ()
    kept = sorted({c for c in current if matching.get(c, False)})[:max_replicas]
    taken = set(kept)
    spare = (c for c in sorted(matching) if matching[c] and c not in taken)
    fill = [c for _, c in zip(range(max_replicas - len(kept)), spare, strict=False)]
    return tuple(sorted((*kept, *fill)))


def replaced(before: Iterable[str], after: Iterable[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(dropped, added): what a new choice took away and what it brought, each sorted."""
    old, new = set(before), set(after)
    return tuple(sorted(old - new)), tuple(sorted(new - old))

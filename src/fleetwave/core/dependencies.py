"""Profile dependencies (Sveltos' `dependsOn`), decided without I/O.

A profile is delivered to a cluster only once every profile it depends on is provisioned there
(its ClusterSummary for that cluster is Ready). Dependencies that form a cycle can never be met, so
a profile on one is refused in its status, naming the cycle.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence


def cycle_through(name: str, edges: Mapping[str, Sequence[str]]) -> tuple[str, ...] | None:
    """A cycle of dependencies `name` is on, as the path name -> ... -> name; None when there is none.
    Deterministic: dependencies are followed in sorted order, depth first."""
    path: list[str] = [name]
    seen: set[str] = set()

    def walk(node: str) -> tuple[str, ...] | None:
        for nxt in sorted(set(edges.get(node, ()))):
            if nxt == name:
                return (*path, name)
            if nxt in seen:
                continue
            seen.add(nxt)
            path.append(nxt)
            found = walk(nxt)
            if found:
                return found
            path.pop()
        return None

    return walk(name)


def unmet(
    clusters: Iterable[str], needs: Sequence[str], provisioned: Callable[[str, str], bool]
) -> dict[str, tuple[str, ...]]:
    """Cluster -> the dependencies not provisioned there yet (clusters with none are left out)."""
    out: dict[str, tuple[str, ...]] = {}
    for cluster in clusters:
        missing = tuple(sorted(d for d in set(needs) if not provisioned(d, cluster)))
        if missing:
            out[cluster] = missing
    return out


def describe(waiting: Mapping[str, tuple[str, ...]], limit: int = 5) -> str:
    """One line naming (at most `limit`) clusters and what each still waits for."""
    parts = [f"{c} waits for {', '.join(d)}" for c, d in sorted(waiting.items())[:limit]]
    more = len(waiting) - limit
    return "; ".join(parts) + (f"; and {more} more clusters" if more > 0 else "")

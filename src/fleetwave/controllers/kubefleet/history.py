"""Which clusters hold a placement's content, read from the delivery ledgers in run and placement status.

Every run (and a RollingUpdate placement) keeps a ledger `status.deliveries` (cluster -> snapshot
index and hash, applied and done times) and `status.deletions` (cluster -> removal times). The newest
event per cluster across all of them says whether, and at which index, the cluster holds the content:
this is what the deletion stage and the placement's Available condition are computed from (pure).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from fleetwave.api.objects import Obj


@dataclass(frozen=True, slots=True)
class Held:
    cluster: str
    index: str | None  # None once removed
    at: str  # RFC 3339 of the event (sortable as text)
    done: bool
    diffs: tuple[Obj, ...] = ()  # ReportDiff: how the member differed from the snapshot
    overrides: Obj | None = None  # the override snapshots applied (None: the entry says nothing)
    override_error: str = ""


def _events(status: Obj) -> Iterable[Held]:
    for cluster, entry in (status.get("deliveries") or {}).items():
        if entry.get("appliedAt"):
            diffs = tuple(d for d in entry.get("diffedPlacements") or () if isinstance(d, Mapping))
            index, at = str(entry.get("index")), str(entry["appliedAt"])
            applied = entry.get("overrides") if isinstance(entry.get("overrides"), Mapping) else {}
            error = str(entry.get("overrideError") or "")
            yield Held(cluster, index, at, bool(entry.get("doneAt")), diffs, applied, error)
    for cluster, entry in (status.get("deletions") or {}).items():
        if entry.get("doneAt"):
            yield Held(cluster, None, str(entry["doneAt"]), True)


def latest(statuses: Iterable[Obj]) -> dict[str, Held]:
    """The newest event per cluster over every ledger given."""
    return _newest(event for status in statuses for event in _events(status))


def merged(helds: Iterable[Mapping[str, Held]]) -> dict[str, Held]:
    """`latest` over the ledgers each of `helds` was read from, in that order, from what `latest`
    made of each: a ledger that did not change is not read again."""
    return _newest(event for held in helds for event in held.values())


def _newest(events: Iterable[Held]) -> dict[str, Held]:
    """Per cluster, the event with the latest time; of two at the same time, the later one given."""
    out: dict[str, Held] = {}
    for event in events:
        old = out.get(event.cluster)
        if old is None or event.at >= old.at:
            out[event.cluster] = event
    return out


def holding(statuses: Iterable[Obj]) -> set[str]:
    return {c for c, h in latest(statuses).items() if h.index is not None}


def common_index(held: Mapping[str, Held], clusters: Iterable[str]) -> tuple[str | None, bool]:
    """(index every cluster holds, all of them available) — (None, False) when they disagree."""
    indexes = set()
    done = True
    for cluster in clusters:
        h = held.get(cluster)
        if h is None or h.index is None:
            return None, False
        indexes.add(h.index)
        done = done and h.done
    if len(indexes) != 1:
        return None, False
    return indexes.pop(), done

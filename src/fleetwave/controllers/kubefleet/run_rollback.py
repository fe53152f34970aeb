"""What a staged update run rolls back to, and whether a person asked for it (pure; ADR 0078).

A run is one revision: one snapshot carried through the stages. Rolling it back returns every cluster
it updated to the snapshot of the newest run of the same placement that *succeeded* with other
content — or to a snapshot a person names by index (`fleetwave rollback run NAME --to-revision N`).
The target snapshot must still exist (snapshots beyond the placement's revisionHistoryLimit are
pruned); without one there is nothing to roll back to. The request is the same annotations as a
promotion's (`fleetwave.io/rollback`, `-to`, `-reason`), here on the run.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from fleetwave.api import annotations as asks
from fleetwave.api import conditions
from fleetwave.api.objects import Obj
from fleetwave.controllers.kubefleet import snapshots
from fleetwave.core import model as m


@dataclass(frozen=True, slots=True)
class Target:
    snapshot: str  # name of the resource snapshot
    index: int
    hash: str

    @property
    def label(self) -> str:
        return f"resource snapshot {self.index}"

    def engine(self) -> m.RollbackTarget:
        return m.RollbackTarget(content_hash=self.hash, label=self.label)


@dataclass(frozen=True, slots=True)
class Request:
    """A person's rollback request on the run, or none (`reason` empty)."""

    reason: str = ""
    to_index: int | None = None


NO_REQUEST = Request()


def request_of(meta: Obj) -> Request:
    found = meta.get("annotations") or {}
    if not found.get(asks.ROLLBACK):
        return Request()
    to = str(found.get(asks.ROLLBACK_TO) or "")
    reason = str(found.get(asks.ROLLBACK_REASON) or "") or "rollback requested"
    return Request(reason[:256], int(to) if to.isdigit() else None)


def _target(snapshot: Obj) -> Target:
    name = str((snapshot.get("metadata") or {}).get("name"))
    return Target(name, snapshots.index_of(snapshot) or 0, snapshots.hash_of(snapshot))


def last_good(
    runs: Iterable[Obj], existing: Sequence[Obj], placement: str, current_hash: str
) -> Target | None:
    """The snapshot of the newest run of `placement` that succeeded with other content and whose
    snapshot still exists. `runs` and `existing` (the placement's snapshots) are of one namespace."""
    by_name = {str((s.get("metadata") or {}).get("name")): s for s in existing}
    best: tuple[str, Target] | None = None
    for run in runs:
        status = run.get("status") or {}
        if (run.get("spec") or {}).get("placementName") != placement:
            continue
        done = conditions.get(status, "Succeeded")
        if done.get("status") != "True":
            continue
        snapshot = by_name.get(str((status.get("snapshot") or {}).get("name") or ""))
        if snapshot is None or snapshots.hash_of(snapshot) == current_hash:
            continue
        when = str(done.get("lastTransitionTime") or "")
        if best is None or when > best[0]:
            best = (when, _target(snapshot))
    return best[1] if best else None


def by_index(existing: Sequence[Obj], index: int, current_hash: str) -> Target | None:
    snapshot = snapshots.find(existing, index)
    if snapshot is None or snapshots.hash_of(snapshot) == current_hash:
        return None
    return _target(snapshot)


def by_hash(existing: Sequence[Obj], digest: str) -> Obj | None:
    """The snapshot a rollback in progress returns to (newest first: the same content may have been
    cut twice)."""
    return next((s for s in reversed(existing) if snapshots.hash_of(s) == digest), None)

"""When a ClusterProfile's new status only reports progress (ADR 0126).

A profile's status lists its clusters three ways (matching, updating, updated) and carries the
engine's record. As its summaries become Ready one after another, each pass moved a cluster from
`updatingClusters` to `updatedClusters` and wrote the whole status again: at 100 rollouts over 100
clusters, 22,048 ClusterProfile watch events (211 MiB) in one batch, more than the summaries' own.
Such a write is held back as a promotion's progress is (ADR 0120): nothing decides from it — a
profile that depends on this one reads its summaries, a promotion reads its stage's summaries — and
every write is an event each watcher of every profile decodes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fleetwave.controllers.sveltos import promotion_status as ps
from fleetwave.core import status as st
from fleetwave.kube import status as kstatus

_MOVING = ("updatingClusters", "updatedClusters")


def progress_only(previous: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether `new` differs from `previous` only in clusters that went from updating to updated,
    and in how far the engine's Progressing stages got (their counts and messages). A cluster that
    starts, fails, stops matching or goes back to updating, a new content hash, a phase or a
    condition's status is written at once."""
    if (previous.get("rollout") or {}).get("phase") != st.RolloutPhase.PROGRESSING.value:
        return False
    old, fresh = kstatus.normalized(previous), kstatus.normalized(new)
    return old != fresh and _moved_forward(old, fresh) and _fixed(old) == _fixed(fresh)


def _refs(status: Mapping[str, Any], field: str) -> set[tuple[tuple[str, Any], ...]]:
    return {tuple(sorted(r.items())) for r in (status.get(field) or {}).get("clusters") or []}


def _moved_forward(old: Mapping[str, Any], fresh: Mapping[str, Any]) -> bool:
    updating, updated = _refs(old, _MOVING[0]), _refs(old, _MOVING[1])
    now_updating, now_updated = _refs(fresh, _MOVING[0]), _refs(fresh, _MOVING[1])
    return updated <= now_updated and updating | updated == now_updating | now_updated


def _fixed(plain: Mapping[str, Any]) -> dict[str, Any]:
    """The status without what `progress_only` lets move (the lists' content hashes stay)."""
    out = {k: v for k, v in plain.items() if k not in _MOVING}
    out["hashes"] = [(plain.get(f) or {}).get("hash") for f in _MOVING]
    out["rollout"] = ps.record_without_progress(plain.get("rollout"))
    out["conditions"] = ps.without_message(plain.get("conditions"))
    return out

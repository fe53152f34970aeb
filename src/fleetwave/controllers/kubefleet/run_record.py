"""The record of a staged update run, as kept in its status: loaded and dumped as frozen values (pure).

The record is everything a run decided and learnt that the next pass needs: the frozen plan (engine
record), the snapshot and strategy it froze at initialization, the delivery ledger, the approvals it
saw (first-seen times), the deletion stage's clusters and removals, and when it was stopped. The
rest of the status (conditions, stagesStatus, ...) is a view rendered from it (`run_status`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fleetwave.api import conditions
from fleetwave.api.kubefleet import StagedUpdateStrategySpec
from fleetwave.controllers.kubefleet import ledger as lg
from fleetwave.controllers.kubefleet import removals as rm
from fleetwave.controllers.shared import engine_state
from fleetwave.core import status as st

# Status keys the record owns; everything else in status is either rendered or kept verbatim.
KEYS = (
    "snapshot",
    "resourceSnapshotIndexUsed",
    "stagedUpdateStrategySnapshot",
    "rollout",
    "deliveries",
    "approvals",
    "deletionClusters",
    "deletions",
    "stoppedAt",
    "overrideSnapshots",
)


@dataclass(frozen=True, slots=True)
class Seen:
    """An approval request as the run first saw it created, and approved."""

    created_at: str
    approved_at: str | None = None


@dataclass(frozen=True, slots=True)
class RunRecord:
    snapshot_name: str
    snapshot_hash: str
    index: str
    strategy_raw: Mapping[str, Any]
    rollout: st.RolloutStatus
    ledger: lg.Ledger
    approvals: Mapping[str, Seen]
    deletion_clusters: tuple[str, ...]
    deletions: rm.Removals
    stopped_at: str | None = None
    # The override snapshots pinned at initialization: per cluster, and the candidates for clusters
    # that join later (`overrides.pins`).
    overrides: Mapping[str, Any] = field(default_factory=dict)
    strategy: StagedUpdateStrategySpec = field(init=False, compare=False)

    def __post_init__(self) -> None:
        # The frozen strategy is parsed once per load; the raw form is what status keeps.
        object.__setattr__(self, "strategy", StagedUpdateStrategySpec.model_validate(self.strategy_raw))


class Unreadable(Exception):
    """The status does not hold a record (edited by hand, or written by an incompatible version)."""


def initialized(status: Mapping[str, Any]) -> bool:
    return conditions.is_true(status, "Initialized")


def load(status: Mapping[str, Any]) -> RunRecord:
    try:
        return RunRecord(
            snapshot_name=str(status["snapshot"]["name"]),
            snapshot_hash=str(status["snapshot"]["hash"]),
            index=str(status["resourceSnapshotIndexUsed"]),
            strategy_raw=dict(status["stagedUpdateStrategySnapshot"]),
            rollout=engine_state.load(status["rollout"]),
            ledger=lg.load(status.get("deliveries"), str(status["snapshot"]["hash"])),
            approvals=_seen(status.get("approvals")),
            deletion_clusters=tuple(str(c) for c in status.get("deletionClusters") or ()),
            deletions=rm.load(status.get("deletions")),
            stopped_at=str(status["stoppedAt"]) if status.get("stoppedAt") else None,
            overrides=dict(status.get("overrideSnapshots") or {}),
        )
    except (KeyError, TypeError, ValueError) as e:
        raise Unreadable(f"the run's record in status is damaged ({type(e).__name__}: {e})") from e


def _seen(raw: Any) -> dict[str, Seen]:
    out: dict[str, Seen] = {}
    for name, entry in (raw or {}).items():
        if isinstance(entry, Mapping):
            approved = entry.get("approvedAt")
            out[str(name)] = Seen(str(entry.get("createdAt") or ""), str(approved) if approved else None)
    return out


def dump(record: RunRecord) -> dict[str, Any]:
    out: dict[str, Any] = {
        "snapshot": {"name": record.snapshot_name, "hash": record.snapshot_hash},
        "resourceSnapshotIndexUsed": record.index,
        "stagedUpdateStrategySnapshot": dict(record.strategy_raw),
        "rollout": engine_state.dump(record.rollout),
        "deliveries": lg.dump(record.ledger, record.snapshot_hash),  # ADR 0137
        "approvals": {n: _dump_seen(s) for n, s in sorted(record.approvals.items())},
        "deletionClusters": list(record.deletion_clusters),
        "deletions": rm.dump(record.deletions),
    }
    if record.stopped_at:
        out["stoppedAt"] = record.stopped_at
    if record.overrides:
        out["overrideSnapshots"] = dict(record.overrides)
    return out


def _dump_seen(seen: Seen) -> dict[str, Any]:
    out = {"createdAt": seen.created_at}
    if seen.approved_at:
        out["approvedAt"] = seen.approved_at
    return out

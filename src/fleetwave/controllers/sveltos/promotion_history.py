"""A promotion's revisions, kept in `status.revisions` (pure; issue 13, ADR 0078).

Every time the engine freezes a new plan (new content, or a new stage list) a revision begins; it
ends Succeeded, Failed, RolledBack, or Superseded when the next one begins before it ended. An
entry names the content snapshot the revision delivered, so a rollback can pin it again, and says
when it began and ended and why it ended. The list is bounded: the newest `LIMIT` are kept.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from fleetwave.core import model as m
from fleetwave.core import status as st
from fleetwave.core import timestamps

LIMIT = 10
FIELD = "revisions"
_ENDED = {
    st.RolloutPhase.SUCCEEDED: "Succeeded",
    st.RolloutPhase.FAILED: "Failed",
    st.RolloutPhase.ROLLED_BACK: "RolledBack",
}


@dataclass(frozen=True, slots=True)
class Revision:
    """One entry, as a rollback needs it."""

    number: int
    content_hash: str  # the engine's revision hash (content plus the fields that judge it)
    snapshot: str  # the pinned content snapshot's name
    snapshot_hash: str  # the hash deliveries are judged by
    outcome: str

    @property
    def target(self) -> m.RollbackTarget:
        return m.RollbackTarget(self.content_hash, f"revision {self.number}")


def entries(status: Mapping[str, Any]) -> list[dict[str, Any]]:
    raw = status.get(FIELD)
    return [dict(e) for e in raw if isinstance(e, Mapping)] if isinstance(raw, list) else []


def parse(entry: Mapping[str, Any]) -> Revision | None:
    try:
        return Revision(
            number=int(entry["revision"]),
            content_hash=str(entry["contentHash"]),
            snapshot=str(entry["snapshot"]),
            snapshot_hash=str(entry["snapshotHash"]),
            outcome=str(entry.get("outcome", "")),
        )
    except (KeyError, TypeError, ValueError):
        return None


def current(previous: Sequence[Mapping[str, Any]], status: st.RolloutStatus) -> int:
    """The number the engine's current revision has (or gets) in the list."""
    last = previous[-1] if previous else None
    if last is not None and _same(last, status):
        return int(last.get("revision", 0))
    return int(last.get("revision", 0)) + 1 if last is not None else 1


def _same(entry: Mapping[str, Any], status: st.RolloutStatus) -> bool:
    return entry.get("contentHash") == status.content_hash and entry.get(
        "startedAt"
    ) == timestamps.fmt_precise(status.started_at)


def record(
    previous: Sequence[Mapping[str, Any]],
    status: st.RolloutStatus,
    snapshot: str,
    snapshot_hash: str,
    now: datetime,
    approvals: Mapping[str, datetime] | None = None,
    sources: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """The list with the engine's current revision entered or brought up to date; `sources`: the
    Flux sources at the revisions its content came from (ADR 0103)."""
    out = [dict(e) for e in previous]
    if out and not _same(out[-1], status):
        last = out[-1]
        if "endedAt" not in last:
            out[-1] = {**last, "outcome": "Superseded", "endedAt": timestamps.fmt(now)}
    if not out or not _same(out[-1], status):
        out.append(
            {
                "revision": current(previous, status),
                "contentHash": status.content_hash,
                "snapshot": snapshot,
                "snapshotHash": snapshot_hash,
                "startedAt": timestamps.fmt_precise(status.started_at),
                **({"sources": list(sources)} if sources else {}),
            }
        )
    entry = out[-1]
    outcome = _ENDED.get(status.phase)
    entry["outcome"] = outcome or "Progressing"
    if outcome is not None and "endedAt" not in entry:
        entry["endedAt"] = timestamps.fmt(now)
    if status.phase in (st.RolloutPhase.FAILED, st.RolloutPhase.ROLLED_BACK):
        entry["message"] = status.message[:1024]
    if status.rollback is not None:
        entry["rolledBackTo"] = status.rollback.label
    granted = {k: timestamps.fmt(v) for k, v in (approvals or {}).items() if v >= status.started_at}
    if granted:  # when each approval of this revision was first seen (the earliest stays)
        entry["approvals"] = {**granted, **(entry.get("approvals") or {})}
    return out[-LIMIT:]


def rollback_target(
    previous: Sequence[Mapping[str, Any]], current_hash: str, wanted: int | None = None
) -> Revision | None:
    """The revision to return to from the one with engine hash `current_hash`: `wanted` when given
    (any recorded revision with other content), else the newest that succeeded with other content."""
    parsed = [r for r in (parse(e) for e in previous) if r is not None]
    if wanted is not None:
        found = next((r for r in parsed if r.number == wanted), None)
        return found if found is not None and found.content_hash != current_hash else None
    good = [r for r in parsed if r.outcome == "Succeeded" and r.content_hash != current_hash]
    return good[-1] if good else None


def by_content(previous: Sequence[Mapping[str, Any]], content_hash: str) -> Revision | None:
    """The newest recorded revision with this engine hash (what a rollback in progress returns to)."""
    for entry in reversed(previous):
        found = parse(entry)
        if found is not None and found.content_hash == content_hash:
            return found
    return None


def running_sources(
    entries_: Sequence[Mapping[str, Any]], status: st.RolloutStatus, current: Sequence[str]
) -> dict[str, list[str]]:
    """The Flux source revisions each stage's clusters run (ADR 0103): a stage the current revision
    has reached runs `current` (during a rollback, what it returns to); one it has not reached still
    runs the newest revision that succeeded before."""
    target = by_content(entries_, status.rollback.target) if status.rollback is not None else None
    reached = _sources_of(entries_, target.content_hash) if target is not None else list(current)
    earlier = rollback_target(entries_, status.content_hash)
    before = _sources_of(entries_, earlier.content_hash) if earlier is not None else []
    return {
        s.name: reached if s.phase is not st.StagePhase.PENDING else before
        for s in status.stages
        if (reached if s.phase is not st.StagePhase.PENDING else before)
    }


def _sources_of(entries_: Sequence[Mapping[str, Any]], content_hash: str) -> list[str]:
    for entry in reversed(entries_):
        if entry.get("contentHash") == content_hash:
            return [str(x) for x in entry.get("sources") or []]
    return []

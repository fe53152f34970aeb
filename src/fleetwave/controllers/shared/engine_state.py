"""The engine's RolloutStatus <-> the JSON kept in a rollout object's `status.rollout`.

The engine's status is its only memory between steps, so it lives in the API object itself: a
restarted controller reads it back and resumes exactly where it was. Derivable fields (each
cluster's stage, the member set) are not stored.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from fleetwave.core import status as st
from fleetwave.core import timestamps

log = logging.getLogger(__name__)


def _t(value: datetime | None) -> str | None:
    # Sub-second precision: the record must round-trip exactly (a whole-second instant would move
    # gate deadlines and change the engine's next decision).
    return None if value is None else timestamps.fmt_precise(value)


_parse_t = timestamps.parse_optional


def _req_t(value: Any) -> datetime:
    parsed = _parse_t(value)
    if parsed is None:
        raise ValueError("missing timestamp in status.rollout")
    return parsed


def dump(status: st.RolloutStatus) -> dict[str, Any]:
    return {
        "contentHash": status.content_hash,
        "stagesHash": status.stages_hash,
        "startedAt": _t(status.started_at),
        "phase": status.phase.value,
        "current": status.current,
        "lateJoiners": [[c, i] for c, i in status.late_joiners],
        "lateStarted": list(status.late_started),
        "departed": list(status.departed),
        "unmatched": status.unmatched,
        "message": status.message,
        "conditions": [_dump_condition(c) for c in status.conditions],
        "stages": [_dump_stage(s) for s in status.stages],
        **({"rollback": _dump_rollback(status.rollback)} if status.rollback is not None else {}),
    }


def _dump_rollback(r: st.RollbackStatus) -> dict[str, Any]:
    return {
        "target": r.target,
        "label": r.label,
        "reason": r.reason,
        "startedAt": _t(r.started_at),
        "current": r.current,
        "stages": [_dump_stage(s) for s in r.stages],
    }


def _load_rollback(raw: dict[str, Any] | None) -> st.RollbackStatus | None:
    if raw is None:
        return None
    return st.RollbackStatus(
        target=str(raw["target"]),
        label=str(raw.get("label", "")),
        reason=str(raw.get("reason", "")),
        started_at=_req_t(raw["startedAt"]),
        stages=tuple(_load_stage(s) for s in raw["stages"]),
        current=int(raw.get("current", 0)),
    )


def _dump_condition(c: st.Condition) -> dict[str, Any]:
    return {
        "type": c.type,
        "status": c.status.value,
        "reason": c.reason.value,
        "message": c.message,
        "lastTransitionTime": _t(c.last_transition),
    }


def _dump_stage(s: st.StageStatus) -> dict[str, Any]:
    return {
        "name": s.name,
        "clusters": list(s.clusters),
        "maxInFlight": s.max_in_flight,
        "phase": s.phase.value,
        "enteredAt": _t(s.entered_at),
        "startedAt": _t(s.started_at),
        "deliveredAt": _t(s.delivered_at),
        "succeededAt": _t(s.succeeded_at),
        "started": list(s.started),
        "completed": s.completed,
        "lastProgressAt": _t(s.last_progress_at),
        "gates": [_dump_gate(g) for g in s.gates],
        "failed": [{"cluster": c, "message": m} for c, m in s.failed],
        "message": s.message,
        **(
            {"failingSince": [{"cluster": c, "since": _t(t)} for c, t in s.failing_since]}
            if s.failing_since
            else {}
        ),
        **({"setAside": [{"cluster": c, "message": m} for c, m in s.set_aside]} if s.set_aside else {}),
        **({"overBudget": True} if s.over_budget else {}),
        **(
            {"unreadySince": [{"cluster": c, "since": _t(t)} for c, t in s.unready_since]}
            if s.unready_since
            else {}
        ),
    }


def _dump_gate(g: st.GateStatus) -> dict[str, Any]:
    return {"kind": g.kind, "state": g.state.value, "message": g.message, "until": _t(g.until)}


def load(raw: dict[str, Any]) -> st.RolloutStatus:
    """Inverse of `dump`; raises ValueError (or KeyError/TypeError) on a damaged record."""
    stages = tuple(_load_stage(s) for s in raw["stages"])
    stage_of = {c: i for i, s in enumerate(stages) for c in s.clusters}
    return st.RolloutStatus(
        content_hash=str(raw["contentHash"]),
        stages_hash=str(raw["stagesHash"]),
        started_at=_req_t(raw["startedAt"]),
        stages=stages,
        stage_of=stage_of,
        members=frozenset(stage_of),
        phase=st.RolloutPhase(raw.get("phase", "Progressing")),
        current=int(raw.get("current", 0)),
        late_joiners=tuple((str(c), int(i)) for c, i in raw.get("lateJoiners", [])),
        late_started=tuple(raw.get("lateStarted", [])),
        departed=tuple(raw.get("departed", [])),
        unmatched=int(raw.get("unmatched", 0)),
        conditions=tuple(_load_condition(c) for c in raw.get("conditions", [])),
        message=str(raw.get("message", "")),
        rollback=_load_rollback(raw.get("rollback")),
    )


def _load_condition(c: dict[str, Any]) -> st.Condition:
    return st.Condition(
        type=c["type"],
        status=st.ConditionStatus(c["status"]),
        reason=st.Reason(c["reason"]),
        message=c.get("message", ""),
        last_transition=_req_t(c["lastTransitionTime"]),
    )


def _load_stage(s: dict[str, Any]) -> st.StageStatus:
    return st.StageStatus(
        name=s["name"],
        clusters=tuple(s.get("clusters", [])),
        max_in_flight=int(s.get("maxInFlight", 1)),
        phase=st.StagePhase(s.get("phase", "Pending")),
        entered_at=_parse_t(s.get("enteredAt")),
        started_at=_parse_t(s.get("startedAt")),
        delivered_at=_parse_t(s.get("deliveredAt")),
        succeeded_at=_parse_t(s.get("succeededAt")),
        started=tuple(s.get("started", [])),
        completed=int(s.get("completed", 0)),
        last_progress_at=_parse_t(s.get("lastProgressAt")),
        gates=tuple(
            st.GateStatus(g["kind"], st.GateState(g["state"]), g.get("message", ""), _parse_t(g.get("until")))
            for g in s.get("gates", [])
        ),
        failed=tuple((f["cluster"], f.get("message", "")) for f in s.get("failed", [])),
        message=s.get("message", ""),
        failing_since=tuple((f["cluster"], _req_t(f["since"])) for f in s.get("failingSince", [])),
        set_aside=tuple((f["cluster"], f.get("message", "")) for f in s.get("setAside", [])),
        over_budget=bool(s.get("overBudget", False)),
        unready_since=tuple((f["cluster"], _req_t(f["since"])) for f in s.get("unreadySince", [])),
    )


def previous_of(raw: Mapping[str, Any]) -> st.RolloutStatus | None:
    """The engine record kept in an object's status; None (a fresh plan) when absent or unreadable."""
    record = (raw.get("status") or {}).get("rollout")
    if not record:
        return None
    try:
        return load(record)
    except (ValueError, KeyError, TypeError):
        log.warning(
            "%s: unreadable status.rollout; starting a fresh plan", (raw.get("metadata") or {}).get("name")
        )
        return None

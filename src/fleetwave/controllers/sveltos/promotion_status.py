"""ClusterPromotion status, Sveltos-shaped, from the engine's status (pure).

Per stage a human-readable description of what it waits for (delay until T, window, approval,
health check X failing on cluster Y: message, all matching clusters deployed), plus Sveltos' hashes,
currentStageName and lastPromotionTime, conditions, the engine record and first-seen approval times.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from fleetwave.api.models import ClusterPromotion
from fleetwave.controllers.shared import engine_state
from fleetwave.controllers.sveltos import rollout_facts as rf
from fleetwave.core import model as m
from fleetwave.core import status as st
from fleetwave.core import timestamps
from fleetwave.kube import status as kstatus

ALL_DEPLOYED = "All matching clusters are successfully deployed."


def _waiting_on(stage: st.StageStatus, deliveries: Mapping[str, m.Delivery]) -> str:
    """Why in-flight clusters are not done yet (unreachable, unhealthy...), which the engine leaves out."""
    notes = []
    for cluster in stage.started:
        d = deliveries.get(cluster)
        if d is not None and not d.done and d.message:
            notes.append(f"cluster {cluster}: {d.message}")
    return "; ".join(notes[:3])


def _checked_at(stage: st.StageStatus) -> datetime | None:
    """When the stage last changed state: Sveltos' `lastStatusCheckTime`. Not `now`: a status that
    changed on every reconcile would be rewritten on every reconcile."""
    times = [t for t in (stage.entered_at, stage.started_at, stage.delivered_at, stage.succeeded_at) if t]
    return max(times) if times else None


def _gate_text(gate: st.GateStatus, stage: st.StageStatus) -> str:
    if gate.kind == "Delay" and gate.until is not None:
        # Sveltos' words for a trigger delay (seed 002): the end of the wait, then the check time.
        since = _checked_at(stage)
        suffix = f" ({timestamps.fmt(since)})" if since else ""
        return f"Delayed: Waiting for Time Window: {timestamps.fmt(gate.until)}{suffix}"
    return gate.message


def describe(stage: st.StageStatus, deliveries: Mapping[str, m.Delivery] | None = None) -> str:
    if stage.failed:
        return "; ".join(f"cluster {c} failed: {msg}" for c, msg in stage.failed)
    if stage.phase is st.StagePhase.SUCCEEDED:
        done = stage.succeeded_at
        return f"Successfully provisioned ({timestamps.fmt(done)})" if done else ALL_DEPLOYED
    waiting = [_gate_text(g, stage) for g in stage.gates if g.state is st.GateState.WAITING]
    if waiting:
        return "; ".join(waiting)
    if stage.phase is st.StagePhase.PROGRESSING:
        text = stage.message or f"deploying: {stage.completed}/{len(stage.clusters)} clusters done"
        why = _waiting_on(stage, deliveries or {})
        return f"{text}; {why}" if why else text
    return stage.message or stage.phase.value


def _stage(
    stage: st.StageStatus, deliveries: Mapping[str, m.Delivery], sources: Sequence[str] = ()
) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": stage.name,
        "phase": stage.phase.value,
        "clusters": len(stage.clusters),
        "completed": stage.completed,
        "currentStatusDescription": describe(stage, deliveries),
        "lastStatusCheckTime": timestamps.fmt_optional(_checked_at(stage)),
        "lastUpdateReconciledTime": timestamps.fmt_optional(stage.started_at),
        "lastSuccessfulAppliedTime": timestamps.fmt_optional(stage.succeeded_at),
        "sources": list(sources) or None,  # the Flux source revisions its clusters run (ADR 0103)
    }
    if stage.failed:
        entry["failureMessage"] = describe(stage)
    elif stage.phase is st.StagePhase.SUCCEEDED:
        entry["failureMessage"] = ALL_DEPLOYED  # Sveltos reports success in this field too (seed 001)
    return {k: v for k, v in entry.items() if v is not None}


def _last_promotion(status: st.RolloutStatus) -> datetime | None:
    times = [s.succeeded_at for s in status.stages if s.succeeded_at is not None]
    return max(times) if times else None


def build(
    promotion: ClusterPromotion,
    status: st.RolloutStatus,
    content_hash: str,
    stages_hash: str,
    approvals: Mapping[str, datetime],
    deliveries: Mapping[str, m.Delivery],
    *,
    generation: int | None,
    previous: Mapping[str, Any],
    sources: Mapping[str, Sequence[str]] | None = None,
) -> dict[str, Any]:
    current = status.current_stage
    last = _last_promotion(status)
    return {
        "profileSpecHash": content_hash,
        "stagesHash": stages_hash,
        "currentStageName": current.name if current else (status.stages[-1].name if status.stages else None),
        "lastPromotionTime": timestamps.fmt(last) if last else previous.get("lastPromotionTime"),
        "stages": [_stage(s, deliveries, (sources or {}).get(s.name, ())) for s in status.stages],
        "conditions": rf.conditions(status, generation),
        "approvals": {k: timestamps.fmt(v) for k, v in approvals.items()} or None,
        "rollout": engine_state.dump(status),
        "observedGeneration": generation,
        "message": status.message,
    }


def progress_only(previous: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether `new` only says how far a stage that stays Progressing got: its description (which
    member it waits on and that member's judgement), its count of clusters done, when one last
    finished, and the messages that repeat them ("delivering: 22/60 clusters done"). Every
    transition, a cluster started or failed, a gate's state and a condition's status differ
    elsewhere. Such a write is held back a few seconds, as a summary's progress is (ADR 0068): at
    100 clusters a stage of 60 wrote one per pass, each waking the next pass (ADR 0120). The record
    then keeps the older count, so the next pass sees progress again and moves `lastProgressAt` on:
    a progress deadline counts from at most PROGRESS_EVERY seconds later."""
    if (previous.get("rollout") or {}).get("phase") != st.RolloutPhase.PROGRESSING.value:
        return False
    old, fresh = kstatus.normalized(previous), kstatus.normalized(new)
    return old != fresh and _without_progress(old) == _without_progress(fresh)


_STAGE_PROGRESS = ("currentStatusDescription", "completed")
_RECORD_STAGE_PROGRESS = ("completed", "lastProgressAt", "message")


def _without_progress(plain: Mapping[str, Any]) -> dict[str, Any]:
    """A normalised status without what `progress_only` lets move."""
    rollout = dict(plain.get("rollout") or {})
    rollout["stages"] = [_stage_without(s, _RECORD_STAGE_PROGRESS) for s in rollout.get("stages") or []]
    rollout["conditions"] = [_without_message(c) for c in rollout.get("conditions") or []]
    rollout.pop("message", None)
    out = {k: v for k, v in plain.items() if k != "message"}
    out["rollout"] = rollout
    out["stages"] = [_stage_without(s, _STAGE_PROGRESS) for s in plain.get("stages") or []]
    out["conditions"] = [_without_message(c) for c in plain.get("conditions") or []]
    return out


def _stage_without(stage: Any, keys: tuple[str, ...]) -> Any:
    """A stage without its progress, unless it is not Progressing: then it is compared whole."""
    if not isinstance(stage, dict) or stage.get("phase") != st.StagePhase.PROGRESSING.value:
        return stage
    return {k: v for k, v in stage.items() if k not in keys}


def _without_message(condition: Any) -> Any:
    return (
        {k: v for k, v in condition.items() if k != "message"} if isinstance(condition, dict) else condition
    )

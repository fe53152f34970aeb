"""The seed-shaped status of a staged update run, from the engine record and the ledgers (pure).

Conditions Initialized / Progressing / Succeeded with upstream's reasons, stagesStatus (per-cluster
Started / Succeeded, before- and after-stage task status), deletionStageStatus. Transition times
only move when a condition's status flips.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from fleetwave import translate
from fleetwave.api.conditions import cond, find
from fleetwave.api.kubefleet import StageConfig, StagedUpdateStrategySpec
from fleetwave.api.objects import Obj
from fleetwave.controllers.kubefleet import ledger as lg
from fleetwave.controllers.kubefleet import naming as nm
from fleetwave.controllers.kubefleet import removals as rm
from fleetwave.controllers.kubefleet.run_record import KEYS, RunRecord, dump
from fleetwave.core import status as st
from fleetwave.kube.status import normalized

SP = st.StagePhase


@dataclass(frozen=True, slots=True)
class Frame:
    """What a run's view needs beyond its record: who it is, and how clusters are named."""

    kind: str
    generation: int | None
    run: str
    display: Callable[[str], str]


@dataclass(frozen=True, slots=True)
class View:
    kind: str
    generation: int | None
    strategy: StagedUpdateStrategySpec
    record: st.RolloutStatus
    ledger: Mapping[str, Obj]
    run: str
    approvals: Mapping[str, Obj]  # request name -> {createdAt, approvedAt} (first seen)
    deletion_clusters: tuple[str, ...]
    deletions: Mapping[str, Obj]
    mode: str  # Initialize | Run | Stop
    in_flight: bool
    stuck: str
    display: Callable[[str], str]
    now: datetime
    previous: Obj
    pins: Mapping[str, Obj] = field(default_factory=dict)  # cluster -> its pinned override snapshots


def _t(value: datetime | None) -> str | None:
    return None if value is None else st.fmt(value)


def render(
    frame: Frame,
    record: RunRecord,
    *,
    mode: str,
    previous: Obj,
    now: datetime,
    in_flight: bool = False,
    stuck: str = "",
) -> dict[str, Any]:
    """The whole status body: kept fields, the record, and the view rendered from it."""
    view = View(
        kind=frame.kind,
        generation=frame.generation,
        strategy=record.strategy,
        record=record.rollout,
        ledger=lg.dump(record.ledger),
        run=frame.run,
        approvals={
            n: {"createdAt": s.created_at, "approvedAt": s.approved_at} for n, s in record.approvals.items()
        },
        deletion_clusters=record.deletion_clusters,
        deletions=rm.dump(record.deletions),
        mode=mode,
        in_flight=in_flight,
        stuck=stuck,
        display=frame.display,
        now=now,
        previous=previous,
        pins=dict(record.overrides.get("clusters") or {}),
    )
    kept = {k: v for k, v in previous.items() if k not in RENDERED and k not in KEYS}
    return {**kept, **dump(record), **build(view)}


RENDERED = ("conditions", "stagesStatus", "deletionStageStatus")


def build(view: View) -> dict[str, Any]:
    prev_stages = {s.get("stageName"): s for s in view.previous.get("stagesStatus") or []}
    stages = [
        _stage(view, cfg, s, prev_stages.get(s.name) or {})
        for cfg, s in zip(view.strategy.stages, view.record.stages, strict=True)
    ]
    return {
        "conditions": _run_conditions(view),
        "stagesStatus": stages,
        "deletionStageStatus": _deletion(view, view.previous.get("deletionStageStatus") or {}),
    }


def finished(record: st.RolloutStatus) -> bool:
    return record.phase is st.RolloutPhase.SUCCEEDED


def _run_conditions(view: View) -> list[dict[str, Any]]:
    prev = view.previous.get("conditions") or []
    now, gen = st.fmt(view.now), view.generation
    init = find(prev, "Initialized")
    out = [dict(init)] if init else []
    for c in out:
        c["observedGeneration"] = gen
    status, reason, message = _progressing(view)
    out.append(cond(prev, "Progressing", status, reason, message, gen, now))
    done = _succeeded(view)
    if done is not None:
        out.append(cond(prev, "Succeeded", done[0], done[1], done[2], gen, now))
    return out


def _progressing(view: View) -> tuple[str, str, str]:
    record, stage = view.record, view.record.current_stage
    if record.phase is st.RolloutPhase.FAILED:
        return "False", "UpdateRunFailed", record.message
    if record.phase is st.RolloutPhase.ROLLED_BACK:
        return "False", "UpdateRunRolledBack", record.message
    if finished(record) and _deletion_done(view):
        # As upstream leaves it (seed 004): Progressing stays as it was set when the run started;
        # Succeeded says it is over.
        return "True", "UpdateRunStarted", ""
    if view.mode == "Initialize":
        return "False", "UpdateRunNotStarted", "initialized; set spec.state to Run to start the rollout"
    if view.mode == "Stop":
        if view.in_flight:
            return "Unknown", "UpdateRunStopping", "stopping: waiting for the clusters in flight to finish"
        return "False", "UpdateRunStopped", "stopped; set spec.state to Run to resume"
    if record.rollback is not None:
        back = record.rollback.current_stage
        held = back is not None and bool(back.failed)
        return ("False" if held else "True"), "UpdateRunRollingBack", record.message
    if view.stuck:
        return "False", "UpdateRunStuck", view.stuck
    if stage is not None and stage.phase in (SP.WAITING_BEFORE, SP.WAITING_AFTER):
        when = "before-stage" if stage.phase is SP.WAITING_BEFORE else "after-stage"
        text = f"The updateRun is waiting for {when} tasks in stage {stage.name} to complete"
        return "False", "UpdateRunWaiting", f"{text}: {stage.message}"
    return "True", "UpdateRunStarted", _membership(record) or record.message


def _membership(record: st.RolloutStatus) -> str:
    parts = []
    if record.late_joiners:
        names = ", ".join(c for c, _ in record.late_joiners)
        parts.append(f"clusters joined after the plan was frozen: {names}")
    if record.departed:
        parts.append(f"clusters left the fleet during the run (not awaited): {', '.join(record.departed)}")
    return "; ".join(parts)


def _succeeded(view: View) -> tuple[str, str, str] | None:
    if view.record.phase is st.RolloutPhase.FAILED:
        return "False", "UpdateRunFailed", view.record.message
    if view.record.phase is st.RolloutPhase.ROLLED_BACK:
        return "False", "UpdateRunRolledBack", view.record.message
    if finished(view.record) and _deletion_done(view):
        return "True", "UpdateRunSucceeded", ""
    return None


def _deletion_done(view: View) -> bool:
    return all((view.deletions.get(c) or {}).get("doneAt") for c in view.deletion_clusters)


def _cluster(view: View, cluster: str, failed: Mapping[str, str]) -> dict[str, Any]:
    entry = view.ledger.get(cluster) or {}
    gen, now = view.generation, st.fmt(view.now)
    started_at = str(entry.get("appliedAt") or now)
    conds = [cond(None, "Started", "True", "ClusterUpdatingStarted", "", gen, started_at)]
    if entry.get("doneAt"):
        conds.append(
            cond(None, "Succeeded", "True", "ClusterUpdatingSucceeded", "", gen, str(entry["doneAt"]))
        )
    elif cluster in failed:
        conds.append(cond(None, "Succeeded", "False", "ClusterUpdatingFailed", failed[cluster], gen, now))
    if entry.get("overrideError"):
        why = str(entry["overrideError"])
        conds.append(cond(None, "Overridden", "False", "OverriddenFailed", why, gen, started_at))
    out: dict[str, Any] = {**_named(view, cluster), "conditions": conds}
    if not entry.get("doneAt") and entry.get("message"):
        out["message"] = entry["message"]
    return out


def _clusters(view: View, s: st.StageStatus, failed: Mapping[str, str]) -> list[dict[str, Any]]:
    """Every cluster of the frozen plan from initialization on, in rollout order (as upstream lists
    them); conditions once its update started."""
    started = set(s.started)
    ordered = [*s.clusters, *(c for c in s.started if c not in s.clusters)]
    return [_cluster(view, c, failed) if c in started else _named(view, c) for c in ordered]


def _named(view: View, cluster: str) -> dict[str, Any]:
    """A cluster's name and the override snapshots the run pinned for it (upstream's fields)."""
    out: dict[str, Any] = {"clusterName": view.display(cluster)}
    pinned = view.pins.get(cluster) or {}
    for key in ("resourceOverrideSnapshots", "clusterResourceOverrideSnapshots"):
        if pinned.get(key):
            out[key] = list(pinned[key])
    return out


def _stage(view: View, cfg: StageConfig, s: st.StageStatus, prev: Obj) -> dict[str, Any]:
    # Clusters set aside by the failure budget failed too: the stage merely went on without them.
    failed = {
        **dict(s.failed),
        **{c: f"{why} (set aside: within the failure budget)" for c, why in s.set_aside},
    }
    out: dict[str, Any] = {
        "stageName": s.name,
        "clusters": _clusters(view, s, failed),
        "conditions": _stage_conditions(view, cfg, s, prev.get("conditions") or []),
    }
    if s.entered_at is not None:
        out["startTime"] = _t(s.started_at or s.entered_at)
    if s.succeeded_at is not None:
        out["endTime"] = _t(s.succeeded_at)
    if cfg.before_stage_tasks:
        name = translate.approval_request_name(view.run, s.name, "before")
        out["beforeStageTaskStatus"] = [_approval_task(view, name, "BeforeStage")]
    after = []
    for task in cfg.after_stage_tasks or []:
        if task.type == "TimedWait":
            after.append(_wait_task(view, s))
        else:
            name = translate.approval_request_name(view.run, s.name, "after")
            after.append(_approval_task(view, name, "AfterStage"))
    if after:
        out["afterStageTaskStatus"] = after
    return out


def _wait_task(view: View, s: st.StageStatus) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "TimedWait"}
    if s.phase not in (SP.WAITING_AFTER, SP.SUCCEEDED) or not s.clusters:
        return out
    delay = next((g for g in s.gates if g.kind == "Delay"), None)
    if delay is None or delay.state is not st.GateState.PASSED:
        return out
    at = _t(delay.until) or _t(s.succeeded_at) or st.fmt(view.now)
    out["conditions"] = [
        cond(None, "WaitTimeElapsed", "True", "AfterStageTaskWaitTimeElapsed", "", view.generation, at)
    ]
    return out


def _approval_task(view: View, name: str, when: str) -> dict[str, Any]:
    seen = view.approvals.get(name) or {}
    out: dict[str, Any] = {"type": "Approval", "approvalRequestName": name}
    conds = []
    gen = view.generation
    if seen.get("createdAt"):
        reason = f"{when}TaskApprovalRequestCreated"
        conds.append(cond(None, "ApprovalRequestCreated", "True", reason, "", gen, str(seen["createdAt"])))
    if seen.get("approvedAt"):
        reason = f"{when}TaskApprovalRequestApproved"
        conds.append(cond(None, "ApprovalRequestApproved", "True", reason, "", gen, str(seen["approvedAt"])))
    if conds:
        out["conditions"] = conds
    return out


def _stage_conditions(
    view: View, cfg: StageConfig, s: st.StageStatus, prev: Sequence[Obj]
) -> list[dict[str, Any]]:
    gen, now = view.generation, st.fmt(view.now)
    current = view.record.current_stage is not None and view.record.current_stage.name == s.name
    pairs: list[tuple[str, str, str, str]] = []  # type, status, reason, message
    if s.phase is SP.SUCCEEDED and not s.clusters:
        pairs = [
            ("Progressing", "False", "StageUpdatingSkippedNoClusters", s.message),
            ("Succeeded", "True", "StageUpdatingSkippedNoClusters", s.message),
        ]
    elif s.phase is SP.SUCCEEDED:
        waited = "StageUpdatingWaiting" if cfg.after_stage_tasks else "StageUpdatingSucceeded"
        pairs = [("Progressing", "False", waited, ""), ("Succeeded", "True", "StageUpdatingSucceeded", "")]
    elif s.phase is SP.FAILED:
        pairs = [
            ("Progressing", "False", "StageUpdatingFailed", s.message),
            ("Succeeded", "False", "StageUpdatingFailed", s.message),
        ]
    elif current and view.mode == "Stop" and s.phase is not SP.PENDING:
        if view.in_flight:
            pairs = [("Progressing", "Unknown", "StageUpdatingStopping", s.message)]
        else:
            pairs = [("Progressing", "False", "StageUpdatingStopped", s.message)]
    elif s.phase in (SP.WAITING_BEFORE, SP.WAITING_AFTER):
        pairs = [("Progressing", "False", "StageUpdatingWaiting", s.message)]
    elif s.phase is SP.PROGRESSING:
        pairs = [("Progressing", "True", "StageUpdatingStarted", s.message)]
    return [cond(prev, t, status, reason, msg, gen, now) for t, status, reason, msg in pairs]


def _deletion(view: View, prev: Obj) -> dict[str, Any]:
    gen, now = view.generation, st.fmt(view.now)
    out: dict[str, Any] = {"stageName": nm.DELETE_STAGE, "clusters": []}
    if not finished(view.record):
        return out
    for cluster in view.deletion_clusters:
        entry = view.deletions.get(cluster) or {}
        conds = [
            cond(
                None, "Started", "True", "ClusterUpdatingStarted", "", gen, str(entry.get("startedAt") or now)
            )
        ]
        if entry.get("doneAt"):
            conds.append(
                cond(
                    None,
                    "Succeeded",
                    "True",
                    "ClusterUpdatingSucceeded",
                    str(entry.get("message", "")),
                    gen,
                    str(entry["doneAt"]),
                )
            )
        item: dict[str, Any] = {"clusterName": view.display(cluster), "conditions": conds}
        out["clusters"].append(item)
    prev_conds = prev.get("conditions") or []
    out["startTime"] = prev.get("startTime") or now
    conditions = [cond(prev_conds, "Progressing", "True", "StageUpdatingStarted", "", gen, now)]
    if _deletion_done(view):
        conditions.append(cond(prev_conds, "Succeeded", "True", "StageUpdatingSucceeded", "", gen, now))
        out["endTime"] = prev.get("endTime") or now
    out["conditions"] = conditions
    return out


def progress_only(previous: Obj, new: Obj) -> bool:
    """Whether `new` differs from `previous` in a waiting cluster's judgement alone ("0 of 1
    updated replicas available", then "1 updated, 0 available"): messages of the ledger and what is
    rendered from them, while the engine record (a gate's message included: why a stage holds is
    always written at once) and every reason, status and time compare equal."""
    before, after = normalized(previous), normalized(new)
    if before == after or before.get("rollout") != after.get("rollout"):
        return False
    return bool(_without_messages(before) == _without_messages(after))


def _without_messages(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: "" if k == "message" else _without_messages(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_messages(v) for v in value]
    return value

"""The data behind `fleetwave plan`: simulate a translated rollout and lay the timeline out as plain data.

Pure: JSON-ready dicts with stable camelCase keys (schema in docs/plan.md); rendering is the CLI's job.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from fleetwave.core import batching, timeline
from fleetwave.core import model as m
from fleetwave.core import status as st
from fleetwave.translate.inputs import Rollout

Json = dict[str, Any]


@dataclass(frozen=True, slots=True)
class _Stage:
    """Everything one stage row needs, gathered from the spec, the frozen plan and the timeline."""

    spec: m.StageSpec
    plan: st.StageStatus
    sim: timeline.StageTimeline
    granted: Mapping[str, datetime]


def _t(value: datetime | None) -> str | None:
    return None if value is None else st.fmt(value)


def _dur(value: timedelta) -> str:
    secs = int(value.total_seconds())
    h, rem = divmod(secs, 3600)
    mins, s = divmod(rem, 60)
    return "".join(f"{n}{u}" for n, u in ((h, "h"), (mins, "m"), (s, "s")) if n) or "0s"


def describe_gate(gate: m.Gate) -> tuple[str, str]:
    """(kind, human detail) of one gate."""
    match gate:
        case m.Delay():
            return "Delay", f"wait {_dur(gate.duration)}"
        case m.Window():
            return "Window", f"promotion window {gate.from_cron!r} .. {gate.to_cron!r} ({gate.tz})"
        case m.Approval():
            return "Approval", f"approval {gate.id}"
        case m.HealthChecks():
            return "HealthChecks", f"health checks {', '.join(gate.names)} (assumed passing)"
        case m.PreHealthDeployment():
            return "PreHealthDeployment", f"deploy {gate.name}, then check"
        case m.Webhook():
            each = " per cluster" if gate.per_cluster else ""
            return "Webhook", f"webhook {gate.name}{each} (assumed passing)"
        case m.Analysis():
            each = " per cluster" if gate.per_cluster else ""
            every = int(gate.interval.total_seconds())
            return (
                "Analysis",
                f"analysis {gate.name}{each}: {gate.count} measurements every {every}s (assumed passing)",
            )


def _gate_time(gate: m.Gate, anchor: datetime | None, opened: datetime | None, s: _Stage) -> datetime | None:
    """Earliest instant this gate alone lets the stage pass (None: not reached or never)."""
    if anchor is None:
        return None
    if isinstance(gate, m.Delay):
        return anchor + gate.duration
    if isinstance(gate, m.Approval):
        grant = s.granted.get(gate.id)
        return None if grant is None else max(grant, anchor)
    # Windows, health checks and pre-health deployments: as observed when the whole list opened.
    return opened


def _gates(s: _Stage) -> list[Json]:
    out: list[Json] = []
    lists = (
        ("before", s.spec.before, s.sim.entered_at, s.sim.started_at),
        ("after", s.spec.after, s.sim.delivered_at, s.sim.succeeded_at),
    )
    skipped = s.spec.skip_gates_when_empty and not s.plan.clusters
    for when, gates, anchor, opened in lists:
        for gate in gates:
            kind, detail = describe_gate(gate)
            at = _gate_time(gate, anchor, opened, s)
            if skipped:
                state = "skipped"
            elif at is not None:
                state = "passed"
            elif anchor is None:
                state = "notReached"
            else:
                state = "pending" if isinstance(gate, m.Approval) and at is None else "waiting"
            entry = {"when": when, "kind": kind, "detail": detail, "opensAt": _t(at), "state": state}
            if isinstance(gate, m.Approval):
                entry["approvalId"] = gate.id
            out.append(entry)
    return out


def _batches(s: _Stage) -> list[Json]:
    if s.sim.batches:
        return [
            {"index": b.index, "clusters": list(b.clusters), "start": _t(b.start), "end": _t(b.end)}
            for b in s.sim.batches
        ]
    # Not delivered in this simulation: the nominal waves (consecutive chunks of maxInFlight).
    return [
        {"index": i, "clusters": list(names), "start": None, "end": None}
        for i, names in enumerate(s.plan.batches)
    ]


def _state(s: _Stage, outcome: str) -> str:
    if s.sim.succeeded_at is not None:
        return "Skipped" if s.spec.skip_gates_when_empty and not s.plan.clusters else "Succeeded"
    if s.sim.entered_at is None:
        return "NotReached"
    return "Failed" if outcome == st.RolloutPhase.FAILED else "Blocked"


def _stage(s: _Stage, outcome: str) -> Json:
    return {
        "name": s.spec.name,
        "state": _state(s, outcome),
        "clusters": list(s.plan.clusters),
        "maxInFlight": s.plan.max_in_flight,
        "enteredAt": _t(s.sim.entered_at),
        "startedAt": _t(s.sim.started_at),
        "deliveredAt": _t(s.sim.delivered_at),
        "succeededAt": _t(s.sim.succeeded_at),
        "batches": _batches(s),
        "gates": _gates(s),
        "waits": [
            {"description": w.description, "since": _t(w.since), "until": _t(w.until)} for w in s.sim.waits
        ],
        "setAside": list(s.sim.set_aside),
    }


def _blocked_on(stages: list[Json]) -> str | None:
    for stage in stages:
        if stage["state"] != "Blocked":
            continue
        pending = [g for g in stage["gates"] if g["state"] == "pending"]
        if pending:
            ids = ", ".join(g["approvalId"] for g in pending)
            return f"stage {stage['name']}: waiting for approval {ids} (pending)"
        return f"stage {stage['name']}: " + (
            stage["waits"][-1]["description"] if stage["waits"] else "blocked"
        )
    return None


_FAILED = (st.RolloutPhase.FAILED, st.RolloutPhase.ROLLED_BACK)


def _budget(budget: m.FailureBudget | None) -> Json | None:
    if budget is None:
        return None

    def limit(value: m.FailureLimit | None) -> str | None:
        return None if value is None else f"{value.value}%" if value.percent else str(value.value)

    return {
        "maxFailedPerStage": limit(budget.per_stage),
        "maxFailed": limit(budget.total),
        "gracePeriod": _dur(budget.grace),
    }


def _blocked(rollout: Rollout, stages: list[Json]) -> str:
    if rollout.spec.paused:
        return f"paused (spec.paused: true): nothing starts until `fleetwave resume promotion {rollout.name}`"
    return _blocked_on(stages) or "blocked"


def build(rollout: Rollout, fleet: m.Fleet, start: datetime, assumptions: timeline.Assumptions) -> Json:
    """Simulate and report. Approvals granted on request (auto-approve) count from their request."""
    sim = timeline.simulate(rollout.spec, fleet, start, assumptions)
    plan = batching.freeze_plan(rollout.spec, fleet, start)
    granted = dict(assumptions.approvals)
    if assumptions.approve_on_request:
        for spec, ts in zip(rollout.spec.stages, sim.stages, strict=True):
            for gate in (*spec.before, *spec.after):
                anchor = ts.entered_at if gate in spec.before else ts.delivered_at
                if isinstance(gate, m.Approval) and anchor is not None:
                    granted.setdefault(gate.id, anchor)
    outcome = str(sim.outcome)
    stages = [
        _stage(_Stage(spec, p, ts, granted), outcome)
        for spec, p, ts in zip(rollout.spec.stages, plan.stages, sim.stages, strict=True)
    ]
    return {
        "rollout": {"kind": rollout.kind, "name": rollout.name},
        "start": _t(start),
        "outcome": outcome,
        "finishedAt": _t(sim.finished_at),
        "blockedOn": _blocked(rollout, stages) if outcome == "Blocked" else None,
        "failedOn": sim.message if outcome in _FAILED else None,
        "failureBudget": _budget(rollout.spec.failure_budget),
        "onFailure": rollout.spec.on_failure.value,
        "rollback": [
            {
                "name": s.name,
                "clusters": [c for b in s.batches for c in b.clusters],
                "startedAt": _t(s.started_at),
                "succeededAt": _t(s.succeeded_at),
            }
            for s in sim.rollback
        ],
        "assumptions": {
            "deliveryTime": _dur(assumptions.delivery_time),
            "failing": sorted(assumptions.failing_clusters),
            "approvals": {k: _t(v) for k, v in sorted(assumptions.approvals.items())},
            "autoApprove": assumptions.approve_on_request,
        },
        "unmatched": sorted(fleet.names - plan.members),
        "stages": stages,
    }

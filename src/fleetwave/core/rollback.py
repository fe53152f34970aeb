"""Rollback (issue 13, ADR 0078): revert every cluster a revision touched to the revision that last
succeeded, in reverse stage order, with the stages' own batching and health checks. Pure.

The plan is frozen when the rollback begins: per stage, last first, exactly the clusters the failed
revision started there (late joiners with their stage). A cluster the revision never reached is in no
rollback stage, so it is never asked for anything; and nothing runs forward again until the revision
changes. Rollback stages wait on no gate — undoing a bad revision is not held behind the gates that guarded
rolling it out, and least of all behind the health check that failed it (a check that is simply
wrong would strand every earlier stage on the bad revision): a stage is rolled back when its
clusters are back on the target, and its record and Event say what its health checks see at that
moment. A failing rollback delivery holds its stage (a person has to look) and the message says
which clusters are back on the target, which still run the failed revision and which failed to
roll back; pausing the rollout pauses a rollback too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from fleetwave.core import delivery, gates
from fleetwave.core import effects as fx
from fleetwave.core import model as m
from fleetwave.core import status as st

SP = st.StagePhase
# How long a rolled-back stage waits for its health checks' first verdict, to report it.
HEALTH_READ_BOUND = timedelta(seconds=30)


@dataclass(frozen=True, slots=True)
class Walk:
    status: st.RolloutStatus
    effects: tuple[fx.Effect, ...]
    wake_at: datetime | None
    waiting_on_facts: bool


def touched_by_stage(status: st.RolloutStatus) -> list[tuple[str, ...]]:
    """Per forward stage, the clusters this revision started there, in plan order."""
    late = dict(status.late_joiners)
    out = []
    for index, stage in enumerate(status.stages):
        joined = tuple(c for c in status.late_started if late.get(c) == index and c not in stage.started)
        out.append((*stage.started, *joined))
    return out


def begin(
    status: st.RolloutStatus, target: m.RollbackTarget, reason: str, now: datetime
) -> tuple[st.RolloutStatus, fx.Event]:
    touched = touched_by_stage(status)
    stages = tuple(
        st.StageStatus(name=stage.name, clusters=clusters, max_in_flight=max(stage.max_in_flight, 1))
        for stage, clusters in reversed(list(zip(status.stages, touched, strict=True)))
        if clusters
    )
    record = st.RollbackStatus(target.content_hash, target.label, reason, now, stages)
    count = sum(len(s.clusters) for s in stages)
    event = fx.Event(
        "RollingBack",
        f"rolling back {count} clusters to {target.label} in reverse stage order: {reason}",
    )
    return replace(status, rollback=record, phase=st.RolloutPhase.ROLLING_BACK), event


def walk(
    spec: m.RolloutSpec,
    fleet: m.Fleet,
    observed: m.Observed,
    now: datetime,
    status: st.RolloutStatus,
    *,
    fresh: bool,
) -> Walk:
    """Move the rollback on as far as the facts allow in this instant. `fresh`: it began in this
    very step, so the deliveries observed are of the failed revision, not of the target."""
    record = status.rollback
    assert record is not None
    deliveries: Mapping[str, m.Delivery] = {} if fresh else observed.delivery
    effects: list[fx.Effect] = []
    wake: datetime | None = None
    facts = False
    while not record.done:
        stage = record.stages[record.current]
        if spec.paused and stage.phase is SP.PENDING:
            facts = True
            break
        stage, more, stage_wake, stage_facts = _step(spec, fleet, observed, deliveries, now, record, stage)
        effects.extend(more)
        wake = stage_wake or wake
        facts = facts or stage_facts
        stages = (*record.stages[: record.current], stage, *record.stages[record.current + 1 :])
        record = replace(record, stages=stages)
        if stage.phase is not SP.SUCCEEDED:
            break
        record = replace(record, current=record.current + 1)
    if record.done and status.phase is not st.RolloutPhase.ROLLED_BACK:
        effects.append(fx.Event("RolledBack", f"rolled back to {record.label}: {record.reason}"))
    phase = st.RolloutPhase.ROLLED_BACK if record.done else st.RolloutPhase.ROLLING_BACK
    return Walk(replace(status, rollback=record, phase=phase), tuple(effects), wake, facts)


def _step(
    spec: m.RolloutSpec,
    fleet: m.Fleet,
    observed: m.Observed,
    deliveries: Mapping[str, m.Delivery],
    now: datetime,
    record: st.RollbackStatus,
    stage: st.StageStatus,
) -> tuple[st.StageStatus, list[fx.Effect], datetime | None, bool]:
    effects: list[fx.Effect] = []
    if stage.phase is SP.PENDING:
        effects.append(
            fx.Event(
                "RollbackStageStarted", f"stage {stage.name}: rolling back {len(stage.clusters)} clusters"
            )
        )
        stage = replace(stage, phase=SP.PROGRESSING, entered_at=now, started_at=now, last_progress_at=now)
    if stage.phase is SP.PROGRESSING:
        progress = delivery.advance(stage, fleet, deliveries, admit=not spec.paused)
        effects.extend(progress.effects)
        moved = progress.completed > stage.completed or len(progress.started) > len(stage.started)
        stage = replace(
            stage,
            started=progress.started,
            completed=progress.completed,
            failed=progress.failed,
            last_progress_at=now if moved else stage.last_progress_at,
            message=f"rolling back: {progress.message}",
        )
        if progress.failed:
            where = whereabouts(record, stage, deliveries)
            stage = replace(stage, message=f"rolling back held for a person: {progress.message}; {where}")
        if not progress.complete:
            return stage, effects, None, True
        stage = replace(stage, phase=SP.WAITING_AFTER, delivered_at=now)
    if stage.phase is SP.WAITING_AFTER:
        return _after_delivery(spec, observed, now, record, stage, effects)
    return stage, effects, None, False


def _after_delivery(
    spec: m.RolloutSpec,
    observed: m.Observed,
    now: datetime,
    record: st.RollbackStatus,
    stage: st.StageStatus,
    effects: list[fx.Effect],
) -> tuple[st.StageStatus, list[fx.Effect], datetime | None, bool]:
    """The stage's clusters are back: say what its health checks see, then it is rolled back."""
    assert stage.delivered_at is not None
    checks = tuple(g for g in _after_gates(spec, stage.name) if isinstance(g, m.HealthChecks))
    ctx = gates.GateContext(stage.name, stage.delivered_at, now, observed, record.started_at, stage.clusters)
    verdict = gates.evaluate(checks, ctx)
    unread = any((stage.name, name) not in observed.health for gate in checks for name in gate.names)
    deadline = stage.delivered_at + HEALTH_READ_BOUND
    if unread and now < deadline:
        # Not a gate: one more pass so the shell reads the checks over the rolled-back clusters,
        # and the record says what they see. Bounded, so a check that never answers holds nothing.
        wake = now if stage.delivered_at == now else deadline
        return replace(stage, message="rolled back; reading its health checks"), effects, wake, True
    health = "healthy" if verdict.open else verdict.message
    if unread:
        health = f"no verdict from its health checks within {int(HEALTH_READ_BOUND.total_seconds())} s"
    effects.append(
        fx.Event("RollbackStageSucceeded", f"stage {stage.name} rolled back to {record.label} ({health})")
    )
    done = replace(
        stage, phase=SP.SUCCEEDED, succeeded_at=now, gates=verdict.gates, message=f"rolled back ({health})"
    )
    return done, effects, None, False


def whereabouts(
    record: st.RollbackStatus, stage: st.StageStatus, deliveries: Mapping[str, m.Delivery]
) -> str:
    """Which clusters are back on the target and which still run the failed revision, while a
    rollback delivery failure holds `stage` (the current one): what a person needs to decide."""
    back = [c for s in record.stages[: record.current] for c in s.clusters]
    back += [c for c in stage.started if deliveries.get(c, m.PENDING).done]
    failing = {c for c, _ in stage.failed}
    later = [c for s in record.stages[record.current + 1 :] for c in s.clusters]
    still = [c for c in stage.clusters if c not in back and c not in failing] + later
    parts = [f"back on {record.label}: {_names(back)}", f"still on the failed revision: {_names(still)}"]
    if failing:
        parts.append(f"failed to roll back: {_names(sorted(failing))}")
    return "; ".join(parts)


def _names(clusters: list[str], most: int = 5) -> str:
    if not clusters:
        return "none"
    shown = ", ".join(clusters[:most])
    return shown if len(clusters) <= most else f"{shown} and {len(clusters) - most} more"


def _after_gates(spec: m.RolloutSpec, stage: str) -> tuple[m.Gate, ...]:
    found = next((s for s in spec.stages if s.name == stage), None)
    return found.after if found is not None else ()


def message(record: st.RollbackStatus) -> str:
    stage = record.current_stage
    if stage is None:
        return f"rolled back to {record.label}: {record.reason}"
    return f"rolling back to {record.label} ({record.reason}): stage {stage.name}: {stage.message}"

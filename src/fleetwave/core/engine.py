"""The decision engine: `step(spec, fleet, observed, now) -> Decision`. Pure: no I/O, no clock.

One step freezes the plan (first step, or restart on a revision change), walks the current stage
through before-gates -> delivery -> after-gates, moves on as far as the facts allow within the
same instant, and reports conditions, effects and the next wake time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from fleetwave.core import batching, budget, delivery, gates, membership, rollback
from fleetwave.core import effects as fx
from fleetwave.core import model as m
from fleetwave.core import status as st

SP = st.StagePhase
Decision = fx.Decision


@dataclass(slots=True)
class _Acc:
    """Per-step accumulator (local mutation only; nothing escapes but the frozen Decision)."""

    effects: list[fx.Effect] = field(default_factory=list)
    wakes: list[datetime] = field(default_factory=list)
    facts: bool = False

    def wait(self, wake_at: datetime | None, facts: bool) -> None:
        if wake_at is not None:
            self.wakes.append(wake_at)
        self.facts = self.facts or facts


@dataclass(frozen=True, slots=True)
class _Ctx:
    spec: m.RolloutSpec
    fleet: m.Fleet
    observed: m.Observed
    now: datetime


def step(spec: m.RolloutSpec, fleet: m.Fleet, observed: m.Observed, now: datetime) -> Decision:
    ctx, acc = _Ctx(spec, fleet, observed, now), _Acc()
    status = _initial(ctx, acc)
    if status.rollback is None and observed.rollback_request:
        status = _begin_rollback(ctx, status, observed.rollback_request, acc)
    if status.rollback is not None:
        return _roll_back(ctx, status, acc)
    if status.phase is st.RolloutPhase.FAILED:
        return fx.Decision(status, tuple(acc.effects), None, None, None, False)
    status = membership.track(status, spec, fleet, acc.effects)
    status = _advance(ctx, status, acc)
    if status.phase is st.RolloutPhase.FAILED and spec.on_failure is m.OnFailure.ROLLBACK:
        status = _summarize(status, now)
        status = _begin_rollback(ctx, status, status.message, acc)
        if status.rollback is not None:
            return _roll_back(ctx, status, acc)
        return fx.Decision(status, tuple(acc.effects), None, None, None, False)
    # A cluster that joined late starts its delivery like any other: not while paused.
    if not spec.paused:
        status = membership.deliver_late(status, fleet, observed.delivery, acc.effects)
    if membership.late_in_flight(status, fleet, observed.delivery):
        acc.wait(None, True)
    status = _summarize(status, now, spec.paused)
    return _decide(ctx, status, acc)


def _initial(ctx: _Ctx, acc: _Acc) -> st.RolloutStatus:
    prev = ctx.observed.previous
    if prev is None:
        status = batching.freeze_plan(ctx.spec, ctx.fleet, ctx.now)
        acc.effects.append(fx.Event("RolloutStarted", _plan_summary(status)))
        return _initialized(status, st.Reason.INITIALIZED, ctx.now)
    why = _restart_reason(ctx.spec, prev)
    if not why:
        return prev
    status = batching.freeze_plan(ctx.spec, ctx.fleet, ctx.now)
    acc.effects.append(
        fx.Event("Restarted", f"{why}; restarting from the first stage. {_plan_summary(status)}")
    )
    if ctx.spec.withdraw_dropped:
        acc.effects.extend(fx.Withdraw(c) for c in sorted(_touched(prev) - status.members))
    return _initialized(status, st.Reason.RESTARTED, ctx.now)


def _begin_rollback(ctx: _Ctx, status: st.RolloutStatus, reason: str, acc: _Acc) -> st.RolloutStatus:
    """Start rolling back, or say why there is nothing to roll back to (the rollout stays as it is)."""
    target = ctx.observed.rollback_target
    if target is None or target.content_hash == status.content_hash:
        why = "no earlier revision succeeded: nothing to roll back to"
        if why in status.message:
            return status  # said once already
        acc.effects.append(fx.Event("RollbackImpossible", f"cannot roll back ({reason}): {why}"))
        return replace(status, message=f"{status.message}; {why}" if status.message else why)
    status, event = rollback.begin(status, target, reason, ctx.now)
    acc.effects.append(event)
    return status


def _roll_back(ctx: _Ctx, status: st.RolloutStatus, acc: _Acc) -> fx.Decision:
    prev = ctx.observed.previous
    fresh = prev is None or prev.rollback is None
    walked = rollback.walk(ctx.spec, ctx.fleet, ctx.observed, ctx.now, status, fresh=fresh)
    acc.effects.extend(walked.effects)
    acc.wait(walked.wake_at, walked.waiting_on_facts)
    record = walked.status.rollback
    if fresh and record is not None and not record.done:
        acc.wait(ctx.now, False)  # come back at once to read the target's deliveries
    return _decide(ctx, _summarize_rollback(walked.status, ctx.now), acc)


def _summarize_rollback(status: st.RolloutStatus, now: datetime) -> st.RolloutStatus:
    cs, r = st.ConditionStatus, st.Reason
    record = status.rollback
    assert record is not None
    message = rollback.message(record)
    if record.done:
        conds = st.set_condition(status.conditions, "Progressing", cs.FALSE, r.ROLLED_BACK, message, now)
        conds = st.set_condition(conds, "Succeeded", cs.FALSE, r.ROLLED_BACK, message, now)
        return replace(status, conditions=conds, message=message)
    stage = record.current_stage
    held = stage is not None and bool(stage.failed)
    progressing = (cs.FALSE, r.CLUSTER_FAILED) if held else (cs.TRUE, r.ROLLING_BACK)
    conds = st.set_condition(status.conditions, "Progressing", *progressing, message, now)
    conds = st.set_condition(conds, "Succeeded", cs.FALSE, r.ROLLING_BACK, message, now)
    return replace(status, conditions=conds, message=message)


def _restart_reason(spec: m.RolloutSpec, prev: st.RolloutStatus) -> str:
    if spec.revision.content_hash != prev.content_hash:
        return "content changed"
    names = tuple(s.name for s in spec.stages)
    if spec.revision.stages_hash != prev.stages_hash or names != tuple(s.name for s in prev.stages):
        return "stage list changed"
    return ""


def _touched(status: st.RolloutStatus) -> set[str]:
    touched = set(status.late_started)
    for stage in status.stages:
        touched.update(stage.started)
    return touched


def _plan_summary(status: st.RolloutStatus) -> str:
    sizes = ", ".join(f"{s.name}={len(s.clusters)}" for s in status.stages)
    return f"plan frozen: {len(status.members)} clusters in {len(status.stages)} stages ({sizes}); " + (
        f"{status.unmatched} clusters match no stage"
    )


def _initialized(status: st.RolloutStatus, reason: st.Reason, now: datetime) -> st.RolloutStatus:
    conds = st.set_condition((), "Initialized", st.ConditionStatus.TRUE, reason, _plan_summary(status), now)
    return replace(status, conditions=conds)


def _advance(ctx: _Ctx, status: st.RolloutStatus, acc: _Acc) -> st.RolloutStatus:
    """Walk stages while they complete within this same instant."""
    while status.current < len(status.stages):
        index = status.current
        if ctx.spec.paused and status.stages[index].phase is SP.PENDING:
            return status  # entering a stage starts its timers and, soon, its deliveries
        stage = _step_stage(ctx, status, index, acc)
        status = status.with_stage(index, stage)
        if stage.phase is SP.FAILED:
            return replace(status, phase=st.RolloutPhase.FAILED)
        if stage.phase is not SP.SUCCEEDED:
            return status
        status = replace(status, current=index + 1)
    return status


def _step_stage(ctx: _Ctx, status: st.RolloutStatus, index: int, acc: _Acc) -> st.StageStatus:
    spec = ctx.spec.stages[index]
    stage = status.stages[index]
    limit = batching.resolve_max_in_flight(spec.max_in_flight, len(stage.clusters))
    stage = replace(stage, max_in_flight=limit)
    if stage.phase is SP.PENDING:
        stage = _enter(ctx, spec, stage, acc)
    if stage.phase is SP.WAITING_BEFORE:
        stage = _before(ctx, status, spec, stage, acc)
    if stage.phase is SP.PROGRESSING:
        stage = _deliver(ctx, status, stage, acc)
    if stage.phase is SP.WAITING_AFTER:
        stage = _after(ctx, status, spec, stage, acc)
    return stage


def _enter(ctx: _Ctx, spec: m.StageSpec, stage: st.StageStatus, acc: _Acc) -> st.StageStatus:
    if not stage.clusters and spec.skip_gates_when_empty:
        acc.effects.append(fx.Event("StageSkipped", f"stage {stage.name} has no clusters; gates skipped"))
        return replace(
            stage,
            phase=SP.SUCCEEDED,
            entered_at=ctx.now,
            succeeded_at=ctx.now,
            message="no clusters; skipped",
        )
    acc.effects.append(fx.Event("StageEntered", f"stage {stage.name}: {len(stage.clusters)} clusters"))
    return replace(stage, phase=SP.WAITING_BEFORE, entered_at=ctx.now)


def _gate_ctx(
    ctx: _Ctx, status: st.RolloutStatus, stage: st.StageStatus, anchor: datetime
) -> gates.GateContext:
    return gates.GateContext(stage.name, anchor, ctx.now, ctx.observed, status.started_at, stage.clusters)


def _run_gates(
    ctx: _Ctx,
    status: st.RolloutStatus,
    gate_list: tuple[m.Gate, ...],
    stage: st.StageStatus,
    anchor: datetime,
) -> tuple[gates.GateVerdict, list[fx.Effect]]:
    verdict = gates.evaluate(gate_list, _gate_ctx(ctx, status, stage, anchor))
    opened: list[fx.Effect] = []
    if verdict.open:
        opened = [
            fx.ResetApproval(stage.name, g.id)
            for g in gate_list
            if isinstance(g, m.Approval) and g.auto_reset
        ]
    return verdict, opened


def _before(
    ctx: _Ctx, status: st.RolloutStatus, spec: m.StageSpec, stage: st.StageStatus, acc: _Acc
) -> st.StageStatus:
    assert stage.entered_at is not None
    verdict, opened = _run_gates(ctx, status, spec.before, stage, stage.entered_at)
    acc.effects.extend(verdict.effects)
    if not verdict.open:
        acc.wait(verdict.wake_at, verdict.waiting_on_facts)
        return replace(stage, gates=verdict.gates, message=f"before-gates: {verdict.message}")
    if ctx.spec.paused:
        acc.wait(None, True)  # resuming is a spec edit, which wakes the rollout
        return replace(stage, gates=verdict.gates, message="before-gates open; paused")
    acc.effects.extend(opened)
    acc.effects.append(
        fx.Event("StageStarted", f"stage {stage.name}: delivering to {len(stage.clusters)} clusters")
    )
    return replace(
        stage, phase=SP.PROGRESSING, started_at=ctx.now, last_progress_at=ctx.now, gates=verdict.gates
    )


def _advance_stage(ctx: _Ctx, stage: st.StageStatus) -> delivery.Progress:
    return delivery.advance(
        stage,
        ctx.fleet,
        ctx.observed.delivery,
        admit=not ctx.spec.paused,
        revision=ctx.spec.revision.content_hash,
    )


def _deliver(ctx: _Ctx, status: st.RolloutStatus, stage: st.StageStatus, acc: _Acc) -> st.StageStatus:
    progress = _advance_stage(ctx, stage)
    set_aside_now = False
    if ctx.spec.failure_budget is not None:
        failing, stage = _failing(ctx, stage, progress.failed, acc)
        verdict = budget.judge(ctx.spec.failure_budget, stage, status, failing, ctx.now)
        if verdict.exceeded:
            acc.effects.append(fx.Event("FailureBudgetExceeded", verdict.exceeded))
            return replace(stage, phase=SP.FAILED, failed=failing, over_budget=True, message=verdict.exceeded)
        acc.wait(verdict.wake_at, True)
        set_aside_now = bool(verdict.set_aside)
        for name, why in verdict.set_aside:
            acc.effects.append(
                fx.Event(
                    "ClusterSetAside", f"stage {stage.name}: cluster {name} failed, within budget: {why}"
                )
            )
        stage = replace(
            stage, failing_since=verdict.failing_since, set_aside=stage.set_aside + verdict.set_aside
        )
        if verdict.set_aside:  # their slots are free now: fill them in this same step
            progress = _advance_stage(ctx, stage)
    acc.effects.extend(progress.effects)
    old_failed = {name for name, _ in stage.failed}
    for name, why in progress.failed:
        if name not in old_failed:
            acc.effects.append(fx.Event("ClusterFailed", f"stage {stage.name}: cluster {name} failed: {why}"))
    moved = (
        progress.completed > stage.completed or len(progress.started) > len(stage.started) or set_aside_now
    )
    # The progress deadline measures a running rollout: a pause neither fails it nor eats into it.
    prev = ctx.observed.previous
    resumed = not ctx.spec.paused and prev is not None and prev.phase is st.RolloutPhase.PAUSED
    last = ctx.now if moved or resumed else stage.last_progress_at
    stage = replace(
        stage,
        started=progress.started,
        completed=progress.completed,
        failed=progress.failed,
        last_progress_at=last,
        message=progress.message,
    )
    if progress.complete:
        aside = f" ({len(stage.set_aside)} set aside as failed)" if stage.set_aside else ""
        acc.effects.append(
            fx.Event("StageDelivered", f"stage {stage.name}: every member cluster is done{aside}")
        )
        return replace(stage, phase=SP.WAITING_AFTER, delivered_at=ctx.now)
    if ctx.spec.paused:
        acc.wait(None, True)
        return stage
    return _check_deadline(ctx, stage, acc)


def _failing(
    ctx: _Ctx, stage: st.StageStatus, failed: tuple[tuple[str, str], ...], acc: _Acc
) -> tuple[tuple[tuple[str, str], ...], st.StageStatus]:
    """What the failure budget judges: failing deliveries, and — with a progress deadline — clusters
    unavailable past it, which are failed at once (the deadline was their grace)."""
    deadline = ctx.spec.progress_deadline
    budget_ = ctx.spec.failure_budget
    if deadline is None or budget_ is None or ctx.spec.paused:
        return failed, stage
    found = budget.unavailable(stage, ctx.observed.delivery, deadline, ctx.now)
    acc.wait(found.wake_at, True)
    known = {name for name, _ in stage.failing_since}
    due = tuple((name, ctx.now - budget_.grace) for name, _ in found.overdue if name not in known)
    stage = replace(stage, unready_since=found.unready_since, failing_since=stage.failing_since + due)
    return failed + found.overdue, stage


def _check_deadline(ctx: _Ctx, stage: st.StageStatus, acc: _Acc) -> st.StageStatus:
    deadline = ctx.spec.progress_deadline
    if deadline is None or stage.last_progress_at is None:
        acc.wait(None, True)
        return stage
    expires = stage.last_progress_at + deadline
    if ctx.now < expires:
        acc.wait(expires, True)
        return stage
    message = f"no progress since {st.fmt(stage.last_progress_at)} (deadline {deadline}): {stage.message}"
    acc.effects.append(fx.Event("ProgressDeadlineExceeded", f"stage {stage.name}: {message}"))
    return replace(stage, phase=SP.FAILED, message=message)


def _after(
    ctx: _Ctx, status: st.RolloutStatus, spec: m.StageSpec, stage: st.StageStatus, acc: _Acc
) -> st.StageStatus:
    delivered_at = stage.delivered_at
    assert delivered_at is not None
    gate_list = () if (not stage.clusters and spec.skip_gates_when_empty) else spec.after
    failed = _stage_analysis_failure(ctx.observed, gate_list, stage.name)
    if failed and (ctx.spec.failure_budget is not None or ctx.spec.on_failure is m.OnFailure.ROLLBACK):
        # A stage-wide analysis names no cluster to set aside: with a budget or a rollback to
        # fall back on, it fails the rollout (ADR 0081); without, it holds the stage (below).
        acc.effects.append(fx.Event("AnalysisFailed", f"stage {stage.name}: {failed}"))
        return replace(stage, phase=SP.FAILED, message=failed)
    if ctx.spec.failure_budget is not None:
        stage = _judge_health(ctx, status, gate_list, stage, acc)
        if stage.phase is SP.FAILED:
            return stage
        ctx = replace(ctx, observed=_without_set_aside(ctx.observed, stage))
    verdict, opened = _run_gates(ctx, status, gate_list, stage, delivered_at)
    acc.effects.extend(verdict.effects)
    if not verdict.open:
        acc.wait(verdict.wake_at, verdict.waiting_on_facts)
        return replace(stage, gates=verdict.gates, message=f"after-gates: {verdict.message}")
    acc.effects.extend(opened)
    acc.effects.extend(
        fx.RemovePreHealthCheck(stage.name, g.name) for g in gate_list if isinstance(g, m.PreHealthDeployment)
    )
    acc.effects.append(fx.Event("StageSucceeded", f"stage {stage.name} succeeded"))
    return replace(stage, phase=SP.SUCCEEDED, succeeded_at=ctx.now, gates=verdict.gates, message="succeeded")


def _stage_analysis_failure(observed: m.Observed, gate_list: tuple[m.Gate, ...], stage: str) -> str:
    """The message of the first stage-wide analysis of the list that failed for good, or ""."""
    for gate in gate_list:
        if isinstance(gate, m.Analysis) and not gate.per_cluster:
            failed = gates.analysis_failure(gate, observed.analyses.get((stage, gate.name)) or {})
            if failed is not None:
                return failed[1]
    return ""


def _analysis_failures(
    observed: m.Observed, gate_list: tuple[m.Gate, ...], stage: st.StageStatus
) -> tuple[tuple[str, str], ...]:
    """Clusters whose per-cluster analysis failed for good: failed at once, without a grace (the
    analysis' measurements were its grace)."""
    aside = {name for name, _ in stage.set_aside}
    found: dict[str, str] = {}
    for gate in gate_list:
        if not (isinstance(gate, m.Analysis) and gate.per_cluster):
            continue
        for cluster, one in sorted((observed.analyses.get((stage.name, gate.name)) or {}).items()):
            if cluster and cluster not in aside and one.failed_for_good(gate):
                found.setdefault(cluster, f"analysis {gate.name}: {one.summary(gate)}")
    return tuple(found.items())


def _health_failures(
    observed: m.Observed, gate_list: tuple[m.Gate, ...], stage: st.StageStatus
) -> tuple[tuple[str, str], ...]:
    """Clusters failing the stage's health checks now (first failure per cluster), set-aside ones
    left out."""
    aside = {name for name, _ in stage.set_aside}
    found: dict[str, str] = {}
    for gate in gate_list:
        if isinstance(gate, m.Webhook) and gate.per_cluster:  # a per-cluster call judges one cluster
            verdict = observed.webhooks.get((stage.name, gate.name))
            for cluster, why in verdict.failures() if verdict is not None else ():
                if cluster and cluster not in aside:
                    found.setdefault(cluster, f"webhook {gate.name}: {why}")
        if not isinstance(gate, m.HealthChecks):
            continue
        for check in gate.names:
            verdict = observed.health.get((stage.name, check))
            for cluster, why in verdict.failures() if verdict is not None else ():
                if cluster not in aside:
                    found.setdefault(cluster, f"health check {check}: {why}")
    return tuple(found.items())


def _judge_health(
    ctx: _Ctx, status: st.RolloutStatus, gate_list: tuple[m.Gate, ...], stage: st.StageStatus, acc: _Acc
) -> st.StageStatus:
    """A cluster whose health checks keep failing past the grace is failed like one whose delivery
    failed: set aside within the budget, over it the rollout stops."""
    assert ctx.spec.failure_budget is not None
    analysed = _analysis_failures(ctx.observed, gate_list, stage)
    known = {name for name, _ in stage.failing_since}
    due = tuple((name, ctx.now - ctx.spec.failure_budget.grace) for name, _ in analysed if name not in known)
    stage = replace(stage, failing_since=stage.failing_since + due)
    failing = tuple({**dict(_health_failures(ctx.observed, gate_list, stage)), **dict(analysed)}.items())
    verdict = budget.judge(ctx.spec.failure_budget, stage, status, failing, ctx.now)
    if verdict.exceeded:
        acc.effects.append(fx.Event("FailureBudgetExceeded", verdict.exceeded))
        return replace(stage, phase=SP.FAILED, failed=failing, over_budget=True, message=verdict.exceeded)
    acc.wait(verdict.wake_at, bool(failing))
    for name, why in verdict.set_aside:
        acc.effects.append(
            fx.Event("ClusterSetAside", f"stage {stage.name}: cluster {name} failed, within budget: {why}")
        )
    return replace(stage, failing_since=verdict.failing_since, set_aside=stage.set_aside + verdict.set_aside)


def _without_set_aside(observed: m.Observed, stage: st.StageStatus) -> m.Observed:
    """Health verdicts as the gates should see them: a check failing only on set-aside clusters passes."""
    aside = {name for name, _ in stage.set_aside}
    if not aside:
        return observed
    return replace(
        observed,
        health=_verdicts_without(observed.health, stage.name, aside),
        webhooks=_verdicts_without(observed.webhooks, stage.name, aside),
        analyses={
            key: ({c: one for c, one in series.items() if c not in aside} if key[0] == stage.name else series)
            for key, series in observed.analyses.items()
        },
    )


def _verdicts_without(
    verdicts: Mapping[tuple[str, str], m.HealthVerdict], stage: str, aside: set[str]
) -> dict[tuple[str, str], m.HealthVerdict]:
    out = dict(verdicts)
    for key, verdict in verdicts.items():
        if key[0] != stage or verdict.ok:
            continue
        rest = tuple((c, why) for c, why in verdict.failures() if c not in aside)
        out[key] = m.HealthVerdict(True) if not rest else m.HealthVerdict(False, rest[0][0], rest[0][1], rest)
    return out


def _summarize(status: st.RolloutStatus, now: datetime, spec_paused: bool = False) -> st.RolloutStatus:
    cs, r = st.ConditionStatus, st.Reason
    stage = status.current_stage
    if status.phase is st.RolloutPhase.FAILED and stage is not None:
        reason = r.CLUSTER_FAILED if stage.failed else r.DEADLINE_EXCEEDED
        if not stage.failed and stage.message.startswith("analysis "):
            reason = r.ANALYSIS_FAILED
        if stage.over_budget:
            reason = r.FAILURE_BUDGET_EXCEEDED
        return _with(status, st.RolloutPhase.FAILED, (cs.FALSE, reason), (cs.FALSE, reason), stage, now)
    if stage is None:
        done = (cs.FALSE, r.SUCCEEDED)
        status = replace(status, message="all stages succeeded")
        return _with(status, st.RolloutPhase.SUCCEEDED, done, (cs.TRUE, r.SUCCEEDED), None, now)
    unknown = (cs.UNKNOWN, r.PROGRESSING)
    if spec_paused:
        status = _with(status, st.RolloutPhase.PAUSED, (cs.FALSE, r.PAUSED), unknown, stage, now)
        return replace(status, message=f"paused: {status.message}")
    if stage.phase in (SP.WAITING_BEFORE, SP.WAITING_AFTER) or stage.failed:
        reason = r.CLUSTER_FAILED if stage.failed else r.WAITING
        return _with(status, st.RolloutPhase.WAITING, (cs.FALSE, reason), unknown, stage, now)
    return _with(status, st.RolloutPhase.PROGRESSING, (cs.TRUE, r.PROGRESSING), unknown, stage, now)


def _with(
    status: st.RolloutStatus,
    phase: st.RolloutPhase,
    progressing: tuple[st.ConditionStatus, st.Reason],
    succeeded: tuple[st.ConditionStatus, st.Reason],
    stage: st.StageStatus | None,
    now: datetime,
) -> st.RolloutStatus:
    message = f"stage {stage.name}: {stage.message}" if stage is not None else status.message
    conds = st.set_condition(status.conditions, "Progressing", *progressing, message, now)
    conds = st.set_condition(conds, "Succeeded", *succeeded, message, now)
    return replace(status, phase=phase, conditions=conds, message=message)


def _decide(ctx: _Ctx, status: st.RolloutStatus, acc: _Acc) -> fx.Decision:
    wake = min(acc.wakes) if acc.wakes else None
    requeue = wake
    if acc.facts:
        poll = ctx.now + ctx.spec.poll_interval
        requeue = poll if requeue is None else min(requeue, poll)
    after = None if requeue is None else max(requeue - ctx.now, timedelta(0))
    return fx.Decision(status, tuple(acc.effects), requeue, after, wake, acc.facts)

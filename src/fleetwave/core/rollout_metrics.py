"""What one rollout's status write means for the rollout metrics (pure; ADR 0082).

`observe(previous, new)` compares the engine's record before and after a step and returns the
gauges' current values for this rollout plus the histogram and counter samples the step produced.
The shell (runtime.metrics.RolloutMetrics) applies them to the registry. No per-cluster label on a
histogram: gate waits are labelled by gate kind, stage durations by rollout kind only.
"""

from __future__ import annotations

from dataclasses import dataclass

from fleetwave.core import status as st

CLUSTER_STATES = ("pending", "in_flight", "done", "failed", "set_aside")


@dataclass(frozen=True, slots=True)
class Observation:
    phase: str
    stage_phases: tuple[tuple[str, str], ...]  # (stage, phase)
    clusters: tuple[tuple[str, str, int], ...]  # (stage, state, count)
    approvals_pending: int
    gate_waits: tuple[tuple[str, float], ...] = ()  # (gate kind, seconds) for gates that passed
    stage_durations: tuple[float, ...] = ()  # started -> succeeded, for stages that just succeeded
    deliveries: tuple[str, ...] = ()  # members whose delivery started in this step
    delivery_failures: tuple[str, ...] = ()  # members that started failing in this step
    rollbacks: tuple[str, ...] = ()  # "started" / "finished"


def _counts(stage: st.StageStatus) -> tuple[tuple[str, int], ...]:
    failed, aside = len(stage.failed), len(stage.set_aside)
    done = stage.completed
    in_flight = max(len(stage.started) - done - failed - aside, 0)
    pending = max(len(stage.clusters) - len(stage.started), 0)
    return tuple(zip(CLUSTER_STATES, (pending, in_flight, done, failed, aside), strict=True))


def _gate_waits(old: st.StageStatus | None, new: st.StageStatus, now: st.Instant) -> list[tuple[str, float]]:
    """Gates that were waiting (or pending) before and passed now: the wait from the phase's anchor
    (stage entered for before-gates, every member delivered for after-gates) to passing."""
    if old is None or not old.gates:
        return []
    before = old.phase in (st.StagePhase.PENDING, st.StagePhase.WAITING_BEFORE)
    anchor = old.entered_at if before else old.delivered_at
    if anchor is None:
        return []
    moved_on = new.phase is not old.phase
    if moved_on:
        at = (new.started_at if before else new.succeeded_at) or now
        passed = [g.kind for g in old.gates if g.state is not st.GateState.PASSED]
    else:
        at = now
        states = {i: g.state for i, g in enumerate(new.gates)}
        passed = [
            g.kind
            for i, g in enumerate(old.gates)
            if g.state is not st.GateState.PASSED and states.get(i) is st.GateState.PASSED
        ]
    return [(kind, max((at - anchor).total_seconds(), 0.0)) for kind in passed]


def observe(previous: st.RolloutStatus | None, new: st.RolloutStatus, now: st.Instant) -> Observation:
    old_stages = {s.name: s for s in previous.stages} if previous is not None else {}
    same_revision = previous is not None and previous.content_hash == new.content_hash
    stage_phases, clusters = [], []
    waits: list[tuple[str, float]] = []
    durations: list[float] = []
    deliveries: list[str] = []
    failures: list[str] = []
    approvals = 0
    for stage in new.stages:
        stage_phases.append((stage.name, stage.phase.value))
        clusters += [(stage.name, state, n) for state, n in _counts(stage)]
        approvals += sum(1 for g in stage.gates if g.kind == "Approval" and g.state is st.GateState.WAITING)
        old = old_stages.get(stage.name) if same_revision else None
        waits += _gate_waits(old, stage, now)
        was_done = old is not None and old.phase is st.StagePhase.SUCCEEDED
        began, ended = stage.started_at, stage.succeeded_at
        if stage.phase is st.StagePhase.SUCCEEDED and not was_done and began and ended:
            durations.append(max((ended - began).total_seconds(), 0.0))
        started_before = set(old.started) if old is not None else set()
        deliveries += [c for c in stage.started if c not in started_before]
        failing_before = {c for c, _ in old.failed} if old is not None else set()
        failures += [c for c, _ in stage.failed if c not in failing_before]
    rollbacks = []
    if new.rollback is not None and (previous is None or previous.rollback is None):
        rollbacks.append("started")
    rolled_back = st.RolloutPhase.ROLLED_BACK
    if new.phase is rolled_back and (previous is None or previous.phase is not rolled_back):
        rollbacks.append("finished")
    return Observation(
        phase=new.phase.value,
        stage_phases=tuple(stage_phases),
        clusters=tuple(clusters),
        approvals_pending=approvals,
        gate_waits=tuple(waits),
        stage_durations=tuple(durations),
        deliveries=tuple(deliveries),
        delivery_failures=tuple(failures),
        rollbacks=tuple(rollbacks),
    )

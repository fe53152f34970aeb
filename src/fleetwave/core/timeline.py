"""Pure timeline simulator: drive `engine.step` with synthetic facts on virtual time.

`fleetwave plan` and the controller share one brain: the simulator only invents the facts the
shell would observe (delivery takes `delivery_time`, approvals arrive at given times or never,
health checks pass unless listed as failing) and jumps virtual time to the next instant at
which either a fact changes or the engine's own `wake_at` falls due.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from fleetwave.core import effects as fx
from fleetwave.core import engine
from fleetwave.core import model as m
from fleetwave.core import status as st

_APPLIED = m.Delivery(m.DeliveryPhase.APPLIED, ready=True)
_APPLYING = m.Delivery(m.DeliveryPhase.APPLYING)


@dataclass(frozen=True, slots=True)
class Assumptions:
    delivery_time: timedelta = timedelta(minutes=2)
    approvals: Mapping[str, datetime] = field(default_factory=dict)  # id -> grant time
    approve_on_request: bool = False  # ids not listed above: granted when requested, else pending
    failing_checks: frozenset[str] = frozenset()
    failing_clusters: frozenset[str] = frozenset()
    max_steps: int = 100_000


@dataclass(frozen=True, slots=True)
class BatchTimeline:
    index: int
    clusters: tuple[str, ...]
    start: datetime
    end: datetime | None  # None: never finishes under these assumptions


@dataclass(frozen=True, slots=True)
class WaitSpan:
    description: str
    since: datetime
    until: datetime | None


@dataclass(frozen=True, slots=True)
class StageTimeline:
    name: str
    clusters: int
    batches: tuple[BatchTimeline, ...]
    waits: tuple[WaitSpan, ...]
    entered_at: datetime | None
    started_at: datetime | None
    delivered_at: datetime | None
    succeeded_at: datetime | None
    set_aside: tuple[str, ...] = ()  # failed clusters the stage went on without (failure budget)


@dataclass(frozen=True, slots=True)
class Timeline:
    start: datetime
    outcome: st.RolloutPhase | str  # Succeeded, Failed, RolledBack, or "Blocked"
    finished_at: datetime | None
    message: str
    stages: tuple[StageTimeline, ...]
    steps: int
    rollback: tuple[StageTimeline, ...] = ()  # with onFailure Rollback: the stages rolled back, in order


# What the simulator rolls back to: the revision before this one, assumed to deliver fine.
PREVIOUS = m.RollbackTarget("<previous>", "the previous revision")
_ENDED = (st.RolloutPhase.SUCCEEDED, st.RolloutPhase.FAILED, st.RolloutPhase.ROLLED_BACK)


@dataclass(slots=True)
class _World:
    """The simulator's synthetic facts (mutable, local to one `simulate` call)."""

    assumptions: Assumptions
    delivery: dict[str, m.Delivery] = field(default_factory=dict)
    started: dict[str, datetime] = field(default_factory=dict)
    finished: dict[str, datetime] = field(default_factory=dict)
    pending: list[tuple[datetime, str]] = field(default_factory=list)
    granted: dict[str, datetime] = field(default_factory=dict)
    waits: dict[str, list[WaitSpan]] = field(default_factory=dict)

    def next_fact(self, now: datetime) -> datetime | None:
        times = [t for t in self.granted.values() if t > now]
        if self.pending:
            times.append(self.pending[0][0])
        return min(times) if times else None

    def settle(self, now: datetime) -> None:
        while self.pending and self.pending[0][0] <= now:
            at, name = heapq.heappop(self.pending)
            self.delivery[name] = _APPLIED
            self.finished[name] = at

    def apply(self, effects: tuple[fx.Effect, ...], now: datetime) -> bool:
        """Carry out effects in the synthetic world; True if a fact changed at `now`."""
        changed = False
        for effect in effects:
            if isinstance(effect, fx.Deliver) and effect.cluster not in self.started:
                changed = self._deliver(effect.cluster, now) or changed
            elif (
                isinstance(effect, fx.RequestApproval)
                and effect.approval_id not in self.granted
                and self.assumptions.approve_on_request
            ):
                self.granted[effect.approval_id] = now
                changed = True
        return changed

    def _deliver(self, name: str, now: datetime) -> bool:
        self.started[name] = now
        if name in self.assumptions.failing_clusters:
            self.delivery[name] = m.Delivery(
                m.DeliveryPhase.FAILED, message="delivery fails (assumed: --fail)"
            )
            return True
        self.delivery[name] = _APPLYING
        heapq.heappush(self.pending, (now + self.assumptions.delivery_time, name))
        return self.assumptions.delivery_time <= timedelta(0)

    def observed(self, spec: m.RolloutSpec, previous: st.RolloutStatus | None, now: datetime) -> m.Observed:
        approvals = {k: t for k, t in self.granted.items() if t <= now}
        health = {
            (s.name, name): m.HealthVerdict(ok=name not in self.assumptions.failing_checks, message="assumed")
            for s in spec.stages
            for name in _check_names(s)
        }
        # Webhooks are assumed to answer as health checks are: passing, unless named as failing.
        hooks = {
            (s.name, g.name): m.HealthVerdict(
                ok=g.name not in self.assumptions.failing_checks, message="assumed failing"
            )
            for s in spec.stages
            for g in (*s.before, *s.after)
            if isinstance(g, m.Webhook)
        }
        # Analyses likewise: every measurement succeeds, unless the analysis is named as failing.
        delivered = {s.name: s.delivered_at for s in previous.stages} if previous else {}
        analyses = {
            (s.name, g.name): {
                "": _assumed_series(g, g.name in self.assumptions.failing_checks, delivered.get(s.name), now)
            }
            for s in spec.stages
            for g in (*s.before, *s.after)
            if isinstance(g, m.Analysis)
        }
        target = PREVIOUS if spec.on_failure is m.OnFailure.ROLLBACK else None
        return m.Observed(
            self.delivery,
            health,
            approvals,
            previous,
            rollback_target=target,
            webhooks=hooks,
            analyses=analyses,
        )

    def note_waits(self, status: st.RolloutStatus, now: datetime) -> None:
        stage = status.current_stage
        waiting = (st.StagePhase.WAITING_BEFORE, st.StagePhase.WAITING_AFTER)
        for spans in self.waits.values():  # close any open span that is no longer current
            if (
                spans
                and spans[-1].until is None
                and (stage is None or spans[-1].description != stage.message)
            ):
                spans[-1] = WaitSpan(spans[-1].description, spans[-1].since, now)
        if stage is None or (stage.phase not in waiting and not stage.failed):
            return
        spans = self.waits.setdefault(stage.name, [])
        if not spans or spans[-1].until is not None:
            spans.append(WaitSpan(stage.message, now, None))


def _check_names(stage: m.StageSpec) -> tuple[str, ...]:
    gates = (*stage.before, *stage.after)
    return tuple(n for g in gates if isinstance(g, m.HealthChecks) for n in g.names)


def simulate(spec: m.RolloutSpec, fleet: m.Fleet, start: datetime, assumptions: Assumptions) -> Timeline:
    forward = world = _World(assumptions, granted=dict(assumptions.approvals))
    now, status, steps = start, None, 0
    while steps < assumptions.max_steps:
        world.settle(now)
        decision = engine.step(spec, fleet, world.observed(spec, status, now), now)
        steps += 1
        if decision.status.rollback is not None and world is forward:
            # Rolling back: deliveries of the previous revision, which every cluster takes fine.
            world = _World(replace(assumptions, failing_clusters=frozenset()), granted=forward.granted)
        status = decision.status
        changed = world.apply(decision.effects, now)
        if world is forward:
            world.note_waits(status, now)
        if status.phase in _ENDED and not changed:
            return _timeline(start, status, forward, world, status.phase, steps, now)
        if changed or decision.requeue_after == timedelta(0):
            continue
        candidates = [t for t in (decision.wake_at, world.next_fact(now)) if t is not None and t > now]
        if not candidates:
            return _timeline(start, status, forward, world, "Blocked", steps, None)
        now = min(candidates)
    assert status is not None
    return _timeline(start, status, forward, world, "Blocked", steps, None)


def _batches(stage: st.StageStatus, world: _World) -> tuple[BatchTimeline, ...]:
    """Group members by the instant their delivery started: the waves a user would see."""
    groups: dict[datetime, list[str]] = {}
    for name in stage.started:
        if name in world.started:
            groups.setdefault(world.started[name], []).append(name)
    out = []
    for i, (at, names) in enumerate(sorted(groups.items())):
        ends = [world.finished.get(n) for n in names]
        end = None if any(e is None for e in ends) else max(e for e in ends if e is not None)
        out.append(BatchTimeline(i, tuple(names), at, end))
    return tuple(out)


def _stages(stages: tuple[st.StageStatus, ...], world: _World) -> tuple[StageTimeline, ...]:
    return tuple(
        StageTimeline(
            name=s.name,
            clusters=len(s.clusters),
            batches=_batches(s, world),
            waits=tuple(world.waits.get(s.name, ())),
            entered_at=s.entered_at,
            started_at=s.started_at,
            delivered_at=s.delivered_at,
            succeeded_at=s.succeeded_at,
            set_aside=tuple(name for name, _ in s.set_aside),
        )
        for s in stages
    )


def _timeline(
    start: datetime,
    status: st.RolloutStatus,
    forward: _World,
    rolling: _World,
    outcome: st.RolloutPhase | str,
    steps: int,
    finished_at: datetime | None,
) -> Timeline:
    back = _stages(status.rollback.stages, rolling) if status.rollback is not None else ()
    return Timeline(start, outcome, finished_at, status.message, _stages(status.stages, forward), steps, back)


def _assumed_series(
    gate: m.Analysis, failing: bool, delivered_at: datetime | None, now: datetime
) -> m.Measurements:
    """An analysis as the plan assumes it: one measurement at delivery, then one every interval, all
    succeeding (so it passes `(count - 1) x interval` after delivery) — or failing from the first."""
    if failing:
        return m.Measurements(gate.failure_limit + 1, gate.failure_limit + 1, "assumed failing")
    if delivered_at is None:
        return m.Measurements(next_at=now)
    taken = min(gate.count, 1 + int((now - delivered_at) / gate.interval))
    next_at = delivered_at + taken * gate.interval if taken < gate.count else None
    return m.Measurements(taken, 0, next_at=next_at)

"""The gate algebra: evaluate an ordered gate list into open / waiting, with wake times and effects.

Gates are evaluated in order and are stateless: each one is a function of the list's anchor time
(`entered_at`), `now` and observed facts, so trigger edits take effect on the next step. A list
opens only at an instant where every gate passes at once, which is how an approval only promotes
while the stage's health checks pass again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from fleetwave.core import effects as fx
from fleetwave.core import model as m
from fleetwave.core import status as st
from fleetwave.core import windows


@dataclass(frozen=True, slots=True)
class GateContext:
    stage: str
    entered_at: st.Instant  # anchor: stage success for after-gates, stage entry for before-gates
    now: st.Instant
    observed: m.Observed
    revision_started_at: st.Instant
    members: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class GateVerdict:
    open: bool
    gates: tuple[st.GateStatus, ...]
    wake_at: st.Instant | None
    waiting_on_facts: bool
    effects: tuple[fx.Effect, ...]
    message: str


@dataclass(frozen=True, slots=True)
class _One:
    status: st.GateStatus
    wake_at: st.Instant | None = None
    facts: bool = False

    @property
    def passed(self) -> bool:
        return self.status.state is st.GateState.PASSED


def approval_valid(gate: m.Approval, ctx: GateContext) -> bool:
    """Auto-reset approvals must be granted during this revision; sticky ones count forever."""
    granted = ctx.observed.approvals.get(gate.id)
    if granted is None:
        return False
    return not gate.auto_reset or granted >= ctx.revision_started_at


def _delay(gate: m.Delay, ctx: GateContext) -> _One:
    until = ctx.entered_at + gate.duration
    if ctx.now >= until:
        return _One(st.GateStatus("Delay", st.GateState.PASSED, f"delay elapsed at {st.fmt(until)}", until))
    msg = f"waiting for delay until {st.fmt(until)}"
    return _One(st.GateStatus("Delay", st.GateState.WAITING, msg, until), wake_at=until)


def _window(gate: m.Window, ctx: GateContext) -> _One:
    state = windows.window_state(gate, ctx.now)
    if state.error:
        return _One(st.GateStatus("Window", st.GateState.WAITING, state.error), facts=True)
    when = st.fmt(state.changes_at) if state.changes_at else "unknown"
    if state.open:
        return _One(st.GateStatus("Window", st.GateState.PASSED, f"promotion window open (closes {when})"))
    msg = f"waiting for promotion window (opens {when})"
    return _One(
        st.GateStatus("Window", st.GateState.WAITING, msg, state.changes_at), wake_at=state.changes_at
    )


def _approval(gate: m.Approval, ctx: GateContext) -> _One:
    if approval_valid(gate, ctx):
        granted = ctx.observed.approvals[gate.id]
        return _One(
            st.GateStatus("Approval", st.GateState.PASSED, f"approved {gate.id} at {st.fmt(granted)}")
        )
    msg = f"waiting for approval {gate.id}"
    return _One(st.GateStatus("Approval", st.GateState.WAITING, msg), facts=True)


def _health(gate: m.HealthChecks, ctx: GateContext) -> _One:
    for name in gate.names:
        verdict = ctx.observed.health.get((ctx.stage, name))
        if verdict is None:
            msg = f"waiting for health check {name}"
        elif not verdict.ok:
            where = f" on cluster {verdict.cluster}" if verdict.cluster else ""
            msg = f"health check {name} failing{where}: {verdict.message}"
        else:
            continue
        return _One(st.GateStatus("HealthChecks", st.GateState.WAITING, msg), facts=True)
    names = ", ".join(gate.names)
    return _One(st.GateStatus("HealthChecks", st.GateState.PASSED, f"health checks passing: {names}"))


def _webhook(gate: m.Webhook, ctx: GateContext) -> _One:
    verdict = ctx.observed.webhooks.get((ctx.stage, gate.name))
    if verdict is None:
        msg = f"waiting for webhook {gate.name}"
    elif not verdict.ok:
        where = f" for cluster {verdict.cluster}" if verdict.cluster else ""
        msg = f"webhook {gate.name} not passing{where}: {verdict.message}"
    else:
        return _One(st.GateStatus("Webhook", st.GateState.PASSED, f"webhook {gate.name} passed"))
    return _One(st.GateStatus("Webhook", st.GateState.WAITING, msg), facts=True)


def analysis_failure(gate: m.Analysis, series: Mapping[str, m.Measurements]) -> tuple[str, str] | None:
    """The first series of the analysis that failed for good: (cluster or "", message)."""
    for cluster, one in sorted(series.items()):
        if one.failed_for_good(gate):
            where = f" for cluster {cluster}" if cluster else ""
            return cluster, f"analysis {gate.name} failed{where}: {one.summary(gate)}"
    return None


def _analysis(gate: m.Analysis, ctx: GateContext) -> _One:
    series = ctx.observed.analyses.get((ctx.stage, gate.name))
    if series is None:
        msg = f"waiting for analysis {gate.name}"
        return _One(st.GateStatus("Analysis", st.GateState.WAITING, msg), facts=True)
    if not series:  # per cluster, every cluster set aside
        return _One(st.GateStatus("Analysis", st.GateState.PASSED, f"analysis {gate.name}: no cluster left"))
    failed = analysis_failure(gate, series)
    if failed is not None:
        return _One(st.GateStatus("Analysis", st.GateState.WAITING, failed[1]), facts=True)
    if all(one.passed(gate) for one in series.values()):
        taken = min(one.taken for one in series.values())
        worst = max(one.failed for one in series.values())
        msg = f"analysis {gate.name} passed: {taken} measurements, {worst} failed"
        return _One(st.GateStatus("Analysis", st.GateState.PASSED, msg))
    taken = min(one.taken for one in series.values())
    worst = max(one.failed for one in series.values())
    due = [one.next_at for one in series.values() if one.next_at is not None]
    wake = min(due) if due else None
    msg = f"analysis {gate.name}: {taken}/{gate.count} measurements, {worst} failed"
    return _One(st.GateStatus("Analysis", st.GateState.WAITING, msg, wake), wake_at=wake, facts=True)


def _pre_health(gate: m.PreHealthDeployment, _ctx: GateContext) -> _One:
    # Not waited on: readiness of the validation payload is expressed by the following health checks.
    msg = f"pre-health-check deployment {gate.name} applied"
    return _One(st.GateStatus("PreHealthDeployment", st.GateState.PASSED, msg))


def _evaluate_one(gate: m.Gate, ctx: GateContext) -> _One:
    match gate:
        case m.Delay():
            return _delay(gate, ctx)
        case m.Window():
            return _window(gate, ctx)
        case m.Approval():
            return _approval(gate, ctx)
        case m.HealthChecks():
            return _health(gate, ctx)
        case m.PreHealthDeployment():
            return _pre_health(gate, ctx)
        case m.Webhook():
            return _webhook(gate, ctx)
        case m.Analysis():
            return _analysis(gate, ctx)


def _approval_effects(gates: tuple[m.Gate, ...], ctx: GateContext) -> list[fx.Effect]:
    """Request every approval of the list up front, so a human can approve during a soak."""
    out: list[fx.Effect] = []
    for gate in gates:
        if not isinstance(gate, m.Approval) or approval_valid(gate, ctx):
            continue
        if gate.id in ctx.observed.approvals:  # a stale auto-reset approval from an older revision
            out.append(fx.ResetApproval(ctx.stage, gate.id))
        out.append(fx.RequestApproval(ctx.stage, gate.id))
    return out


def evaluate(gates: tuple[m.Gate, ...], ctx: GateContext) -> GateVerdict:
    effects = _approval_effects(gates, ctx)
    statuses: list[st.GateStatus] = []
    for i, gate in enumerate(gates):
        one = _evaluate_one(gate, ctx)
        statuses.append(one.status)
        if isinstance(gate, m.PreHealthDeployment):
            effects.extend(fx.DeployPreHealthCheck(ctx.stage, c, gate.name) for c in ctx.members)
        if not one.passed:
            rest = [_not_reached(g) for g in gates[i + 1 :]]
            return GateVerdict(
                False, (*statuses, *rest), one.wake_at, one.facts, tuple(effects), one.status.message
            )
    return GateVerdict(True, tuple(statuses), None, False, tuple(effects), "")


def _not_reached(gate: m.Gate) -> st.GateStatus:
    kind = type(gate).__name__
    return st.GateStatus(kind, st.GateState.PENDING, "not reached yet")

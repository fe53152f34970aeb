"""The failure budget (issue 13): which failing clusters are failed for good, and whether the rollout
may carry on without them. Pure: a function of the stage, the rollout, what fails now and `now`.

A cluster is failed once its delivery has kept failing for the grace period (a retry that succeeds
within it never counts), or once it has stayed unavailable past the progress deadline. Failed
clusters are set aside while both limits hold — the stage's own, over its clusters, and the
rollout's, over all its members — and the stage goes on with the rest; the first one past a limit
stops the rollout, naming every failed cluster and why.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from fleetwave.core import model as m
from fleetwave.core import status as st


@dataclass(frozen=True, slots=True)
class Verdict:
    failing_since: tuple[tuple[str, datetime], ...]  # still within the grace period
    set_aside: tuple[tuple[str, str], ...]  # newly set aside (cluster, why)
    exceeded: str  # "" within budget, else what to say when stopping
    wake_at: datetime | None  # the next grace period to end


def judge(
    budget: m.FailureBudget,
    stage: st.StageStatus,
    rollout: st.RolloutStatus,
    failing: tuple[tuple[str, str], ...],
    now: datetime,
) -> Verdict:
    known = dict(stage.failing_since)
    since = {name: known.get(name, now) for name, _ in failing}
    due = [(name, why) for name, why in failing if now - since[name] >= budget.grace]
    waiting = tuple((name, t) for name, t in since.items() if now - t < budget.grace)
    wake = min((t + budget.grace for _, t in waiting), default=None)
    if not due:
        return Verdict(waiting, (), "", wake)
    stage_failed = [*stage.set_aside, *due]
    # Earlier stages' set-aside clusters, then this stage's: the rollout limit counts them all.
    earlier = [c for s in rollout.stages if s.name != stage.name for c in s.set_aside]
    limits = [
        (limit, len(failed), size, where, failed)
        for limit, failed, size, where in (
            (budget.per_stage, stage_failed, len(stage.clusters), f"stage {stage.name}"),
            (budget.total, [*earlier, *stage_failed], len(rollout.members), "the rollout"),
        )
        if limit is not None
    ]
    if not limits:  # a budget with neither limit tolerates no failure
        limits = [
            (m.FailureLimit(0), len(stage_failed), len(stage.clusters), f"stage {stage.name}", stage_failed)
        ]
    for limit, count, size, where, failed in limits:
        allowed = limit.allowed(size)
        if count > allowed:
            named = "; ".join(f"{name}: {why}" for name, why in failed)
            return Verdict(
                waiting,
                (),
                f"failure budget exceeded: {count} failed clusters in {where}, {allowed} allowed ({named})",
                None,
            )
    return Verdict(waiting, tuple(due), "", wake)


@dataclass(frozen=True, slots=True)
class Unavailable:
    unready_since: tuple[tuple[str, datetime], ...]  # applied, not available yet, within the deadline
    overdue: tuple[tuple[str, str], ...]  # (cluster, why): unavailable past the progress deadline
    wake_at: datetime | None  # the next deadline to pass


def unavailable(
    stage: st.StageStatus,
    delivery: Mapping[str, m.Delivery],
    deadline: timedelta,
    now: datetime,
) -> Unavailable:
    """Started clusters whose delivery applied but which have not become available: each is given the
    progress deadline, counted from when it was first seen so — or from the stage's last progress
    when that is earlier, so a cluster is never judged later than the stage deadline would fail the
    whole stage."""
    known = dict(stage.unready_since)
    aside = {name for name, _ in stage.set_aside}
    failing = {name for name, _ in stage.failed}
    waiting: list[tuple[str, datetime]] = []
    overdue: list[tuple[str, str]] = []
    for name in stage.started:
        state = delivery.get(name)
        if name in aside or name in failing or state is None:
            continue
        if state.phase is not m.DeliveryPhase.APPLIED or state.ready:
            continue
        since = known.get(name, now)
        anchor = min(since, stage.last_progress_at) if stage.last_progress_at else since
        if now - anchor >= deadline:
            why = f"not available for more than {deadline}" + (f": {state.message}" if state.message else "")
            overdue.append((name, why))
        else:
            waiting.append((name, since))
    wake = min((min(t, stage.last_progress_at or t) + deadline for _, t in waiting), default=None)
    return Unavailable(tuple(waiting), tuple(overdue), wake)

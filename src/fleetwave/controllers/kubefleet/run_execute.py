"""A run in state Run under the pass driver (`shared.passes`, write-then-act): observe -> decide
(pure) -> write status -> act.

One engine step per pass. The status is written before the pass's effects are carried out, so an
approval shows the next stage Started before that stage's clusters are applied; what the effects
learn (ledger entries, removals) is written by the next pass, the reconcile's second and last
(PASSES, ADR 0101): everything an effect learnt is in status when the reconcile ends, and what the
second pass decides to do is carried out by the next reconcile. Then the engine's wake time decides
the requeue (`shared.requeue`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime

from fleetwave.api.kubefleet import StageConfig
from fleetwave.controllers.gates import analysis_gates, webhook_gates
from fleetwave.controllers.kubefleet import approvals, run_delete, run_status
from fleetwave.controllers.kubefleet import ledger as lg
from fleetwave.controllers.kubefleet.executor import DeliveryMemory
from fleetwave.controllers.kubefleet.run_pass import Setting, announced, stuck
from fleetwave.controllers.kubefleet.run_record import RunRecord, Seen
from fleetwave.controllers.shared import passes, requeue
from fleetwave.controllers.shared.context import Context
from fleetwave.core import effects as fx
from fleetwave.core import engine
from fleetwave.core import model as m
from fleetwave.core import status as st
from fleetwave.core import timestamps as ts
from fleetwave.kube.status import StatusWrite, Versioned
from fleetwave.runtime.controller import Result

# The step's write, then the write of what its effects learnt (ADR 0101 measures more passes).
PASSES = 2
RETRY_SECONDS = 2.0  # the deletion stage retrying an unreachable cluster


@dataclass(frozen=True, slots=True)
class Request:
    """An approval as the cache shows it (updated in place of a re-read after our own acts): one
    approval may be served under two names (ADR 0112); approving either counts, once.

    `approved_as`: the name approved (first by name); `unaccepted`: its objects not yet acknowledged."""

    approved: bool
    accepted: bool
    approved_as: str = ""
    unaccepted: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Step:
    """One pass's decision: the new record, and the effects to carry out once it is written."""

    record: RunRecord
    decision: fx.Decision
    deliver: tuple[str, ...]
    create: tuple[tuple[str, str], ...]  # (stage, approval request name)
    accept: tuple[str, ...]  # approvals (by upstream name) granted and not yet acknowledged
    acknowledge: tuple[tuple[str, str], ...]  # (request object to mark accepted, the name approved)
    remove: tuple[str, ...]
    events: tuple[fx.Event, ...]


def requests_of(
    raw: Mapping[str, Mapping[str, object]], seed_names: Mapping[str, str] | None = None
) -> dict[str, Request]:
    """The run's approvals by upstream name, folding in the objects under seed 004's names."""
    names: dict[str, list[str]] = {}
    for name in sorted(raw):
        names.setdefault((seed_names or {}).get(name, name), []).append(name)
    return {gate: _request(raw, objects) for gate, objects in names.items()}


def _request(raw: Mapping[str, Mapping[str, object]], objects: list[str]) -> Request:
    approved_as = next((n for n in objects if approvals.approved(raw[n])), "")
    unaccepted = tuple(n for n in objects if not approvals.accepted(raw[n]))
    return Request(bool(approved_as), not unaccepted, approved_as, unaccepted)


def _seen(record: RunRecord, requests: Mapping[str, Request], at: str) -> dict[str, Seen]:
    """First-seen times of requests and approvals; an accepted approval stands even once deleted."""
    out = dict(record.approvals)
    for name, req in requests.items():
        old = out.get(name) or Seen(at)
        approved = old.approved_at or (at if req.approved or req.accepted else None)
        out[name] = Seen(old.created_at or at, approved)
    return out


def _resumed(record: RunRecord, now: datetime) -> st.RolloutStatus:
    """The progress deadline does not run while a run is stopped."""
    stage = record.rollout.current_stage
    if not record.stopped_at or stage is None or stage.last_progress_at is None:
        return record.rollout
    return record.rollout.with_stage(record.rollout.current, replace(stage, last_progress_at=now))


def decide(
    where: Setting,
    record: RunRecord,
    deliveries: Mapping[str, m.Delivery],
    requests: Mapping[str, Request],
    now: datetime,
    webhooks: Mapping[tuple[str, str], m.HealthVerdict] | None = None,
    analyses: analysis_gates.Facts | None = None,
) -> Step:
    at = ts.fmt(now)
    seen = _seen(record, requests, at)
    granted = {n: ts.parse(s.approved_at) for n, s in seen.items() if s.approved_at}
    observed = m.Observed(
        delivery=dict(deliveries),
        approvals=granted,
        previous=_resumed(record, now),
        rollback_target=where.target,
        rollback_request=where.request.reason if record.rollout.rollback is None else "",
        webhooks=dict(webhooks or {}),
        analyses=dict(analyses or {}),
    )
    decision = engine.step(where.spec, where.fleet, observed, now)
    create = _to_create(decision, requests)
    seen.update({name: seen.get(name) or Seen(at) for _, name in create})
    after = replace(record, rollout=decision.status, approvals=seen, stopped_at=None)
    accept, acknowledge = _to_accept(requests)
    return Step(
        record=after,
        decision=decision,
        deliver=tuple(sorted({e.cluster for e in decision.effects if isinstance(e, fx.Deliver)})),
        create=create,
        accept=accept,
        acknowledge=acknowledge,
        remove=run_delete.todo(after),
        events=tuple(dict.fromkeys(e for e in decision.effects if isinstance(e, fx.Event))),
    )


def _to_create(decision: fx.Decision, requests: Mapping[str, Request]) -> tuple[tuple[str, str], ...]:
    """(stage, request name) of each approval the engine asks for that does not exist yet."""
    asked = (e for e in decision.effects if isinstance(e, fx.RequestApproval))
    return tuple(dict.fromkeys((e.stage, e.approval_id) for e in asked if e.approval_id not in requests))


def _to_accept(
    requests: Mapping[str, Request],
) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """Approvals granted and not yet accepted, and each of their objects to mark accepted."""
    accept = tuple(n for n, r in sorted(requests.items()) if r.approved and not r.accepted)
    return accept, tuple((o, requests[n].approved_as) for n in accept for o in requests[n].unaccepted)


async def acknowledge(ctx: Context, where: Setting, step: Step) -> None:
    """Mark approvals accepted before any status shows progress made on them (as upstream does).
    The objects are written at once: an approval served under two names (ADR 0112) is two writes on
    the way from the approval to the next stage's Started, and they do not depend on each other."""
    namespace, now = where.run.metadata.namespace, ctx.clock()
    await asyncio.gather(
        *(approvals.accept(ctx, where.scope, name, namespace, now, as_) for name, as_ in step.acknowledge)
    )


async def act(ctx: Context, memory: DeliveryMemory, where: Setting, step: Step) -> RunRecord:
    """Carry out a written step; the record with what the effects learnt."""
    seed_name = {upstream: seed for seed, upstream in where.seed_approval_names.items()}
    for stage, name in step.create:
        await approvals.ensure(ctx, where.scope, where.obj, stage, name)
        if name in seed_name:  # seed 004's commands patch this one; approving either counts
            await approvals.ensure(ctx, where.scope, where.obj, stage, seed_name[name], same_as=name)
    delivered = await lg.deliver(ctx, memory, step.deliver, where.delivering(step.record.rollout))
    record = replace(step.record, ledger=lg.merged(step.record.ledger, delivered))
    return await run_delete.run(ctx, memory, record, step.remove, where.content.inventory)


def _known(requests: Mapping[str, Request], step: Step) -> dict[str, Request]:
    """Requests as they are after our own acts, without waiting for the cache to show them."""
    out = dict(requests)
    out.update({name: Request(False, False) for _, name in step.create if name not in out})
    out.update({name: Request(True, True) for name in step.accept})
    return out


async def execute(
    ctx: Context,
    memory: DeliveryMemory,
    where: Setting,
    record: RunRecord,
    current: Versioned,
    requests: Mapping[str, Request],
    *,
    announce: Callable[[], Awaitable[None]] | None = None,
) -> Result:
    """`announce`: what to say once the first write is made (a plan initialized with it)."""
    run = _RunPasses(ctx, memory, where, record, dict(requests), announce)
    return await passes.drive(ctx, run, current)


@dataclass(frozen=True, slots=True)
class _Observed:
    """What a run's pass decides from: its clusters' deliveries and the current stage's gates."""

    seen: lg.Observation
    hooks: dict[tuple[str, str], m.HealthVerdict]
    analyses: analysis_gates.Facts


class _RunPasses:
    """A run in state Run under the pass driver: write the step, then act on it (ADR 0061)."""

    policy = passes.Policy.WRITE_THEN_ACT
    max_passes = PASSES
    metered = True
    woken_by_every_change = False  # a run wakes on its spec and its own caught-up writes only

    def __init__(
        self,
        ctx: Context,
        memory: DeliveryMemory,
        where: Setting,
        record: RunRecord,
        requests: dict[str, Request],
        announce: Callable[[], Awaitable[None]] | None,
    ) -> None:
        self.ctx, self.memory, self.where, self.record, self.requests = ctx, memory, where, record, requests
        self.announce = announce
        self.stored: Mapping[str, object] = {}  # the status the pass being written started from
        meta = where.run.metadata
        self.kind, self.key = where.scope.run, where.scope.key(meta.namespace, meta.name)

    async def observe(self, current: Versioned, now: datetime) -> _Observed:
        ctx, where, record = self.ctx, self.where, self.record
        self.stored = current.status
        content = where.delivering(record.rollout)
        wake = lg.wake_of(ctx, where.scope.run, current)
        seen = await lg.observe(ctx, self.memory, record.rollout, where.fleet, record.ledger, content, wake)
        hooks = await _webhooks(ctx, where, record, now)
        return _Observed(seen, hooks, await _analyses(ctx, where, record, now))

    def decide(self, observed: _Observed, current: Versioned, now: datetime) -> passes.Decided[Step]:
        where, record, seen = self.where, self.record, observed.seen
        with_ledger = replace(record, ledger=seen.ledger)
        step = decide(
            where, with_ledger, seen.deliveries, self.requests, now, observed.hooks, observed.analyses
        )
        why = stuck(where, step.record.rollout, step.record.ledger, now)
        body = run_status.render(
            where.frame, step.record, mode="Run", previous=current.status, now=now, stuck=why
        )
        # Only progress (ADR 0068): nothing to accept or announce, and a body that moves no decision.
        quiet = not (step.accept or step.events) and run_status.progress_only(current.status, body)
        pending = bool(step.deliver or step.create or step.remove)
        return passes.Decided(step, step.decision, body, record.rollout, pending, quiet)

    async def before_write(self, decided: passes.Decided[Step]) -> None:
        await acknowledge(self.ctx, self.where, decided.step)

    async def after_write(self, decided: passes.Decided[Step], written: StatusWrite) -> None:
        await announced(self.ctx, self.where, decided.step.events, self.stored, decided.body, self.announce)
        self.announce = None

    async def act(self, decided: passes.Decided[Step]) -> bool:
        step = decided.step
        self.record = await act(self.ctx, self.memory, self.where, step)
        self.requests = _known(self.requests, step)
        return self.record != step.record

    def requeue(self, decided: passes.Decided[Step], now: datetime) -> Result:
        return _requeue(decided.step, now)


async def _webhooks(
    ctx: Context, where: Setting, record: RunRecord, now: datetime
) -> dict[tuple[str, str], m.HealthVerdict]:
    """The current stage's webhooks (ADR 0080), while its after-stage tasks are judged."""
    judged = webhook_gates.judged_stage(record.rollout)
    stage = _stage_config(record, judged)
    if judged is None or stage is None or not stage.webhooks:
        return {}
    name, clusters = judged
    return await webhook_gates.verdicts(ctx, _owner(where, record), name, clusters, stage.webhooks, now)


async def _analyses(ctx: Context, where: Setting, record: RunRecord, now: datetime) -> analysis_gates.Facts:
    """The current stage's analyses (ADR 0081), while its after-stage tasks are judged."""
    judged = webhook_gates.judged_stage(record.rollout)
    stage = _stage_config(record, judged)
    if judged is None or stage is None or not stage.analyses:
        return {}
    name, clusters = judged
    return await analysis_gates.measurements(ctx, _owner(where, record), name, clusters, stage.analyses, now)


def _stage_config(record: RunRecord, judged: tuple[str, list[str]] | None) -> StageConfig | None:
    return None if judged is None else next((s for s in record.strategy.stages if s.name == judged[0]), None)


def _owner(where: Setting, record: RunRecord) -> webhook_gates.Owner:
    meta = where.run.metadata
    return webhook_gates.Owner(where.scope.run, meta.name, meta.namespace, record.snapshot_hash)


def _requeue(step: Step, now: datetime) -> Result:
    if step.record.rollout.phase is st.RolloutPhase.SUCCEEDED:
        # Done once the deletion stage is; until then it retries clusters that could not be cleared.
        return Result(requeue_after=RETRY_SECONDS) if step.remove else Result()
    return requeue.after(step.decision, now)

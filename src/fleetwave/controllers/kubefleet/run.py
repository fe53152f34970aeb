"""(Cluster)StagedUpdateRun reconcile: initialize once, then drive the frozen plan stage by stage.

observe (cache, member availability) -> engine step -> effects (apply the snapshot, create approval
requests, events) -> deletion stage -> one status write -> requeue at the engine's precise wake
time. `spec.state` Initialize prepares only; Stop lets clusters in flight finish and starts nothing
new; Run (again) resumes from the record in status, so a restarted controller resumes too.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

from fleetwave.api import codec
from fleetwave.api.kubefleet import StagedUpdateStrategySpec
from fleetwave.controllers import engine_state
from fleetwave.controllers.context import Context, as_dict
from fleetwave.controllers.kubefleet import approvals, execution, executor, run_init, run_status, snapshots
from fleetwave.controllers.kubefleet import naming as nm
from fleetwave.core import effects as fx
from fleetwave.core import model as m
from fleetwave.core import status as st
from fleetwave.kube import kinds
from fleetwave.kube.status import StatusWrite, write_status
from fleetwave.runtime.controller import Result

log = logging.getLogger(__name__)
IN_FLIGHT_POLL = 1.0
RETRY = 2.0
Obj = Mapping[str, Any]


def _cond(status: Obj, type_: str) -> Obj | None:
    return next((c for c in status.get("conditions") or [] if c.get("type") == type_), None)


def terminal(status: Obj) -> bool:
    init, done = _cond(status, "Initialized"), _cond(status, "Succeeded")
    return (init is not None and init.get("status") == "False") or (
        done is not None and done.get("status") in ("True", "False")
    )


async def reconcile(ctx: Context, scope: nm.Scope, key: str) -> Result:
    namespace, name = nm.split_key(key)
    obj = ctx.cache.obj(scope.run, namespace, name)
    if obj is None or obj.metadata.deletionTimestamp:
        return Result()  # approval requests are owned by the run: garbage collection removes them
    raw = as_dict(obj)
    previous = dict(raw.get("status") or {})
    if terminal(previous):
        return Result()
    now = ctx.clock()
    try:
        run = run_init.parse(raw, scope.run)
    except codec.ManifestError as e:
        return await _init_failed(ctx, scope, obj, previous, str(e), now)
    status = previous
    if (_cond(previous, "Initialized") or {}).get("status") != "True":
        try:
            status = {**previous, **run_init.initialize(ctx, scope, run, now)}
        except run_init.Retry as e:
            return await _initializing(ctx, scope, obj, previous, str(e), now)
        except run_init.Abort as e:
            return await _init_failed(ctx, scope, obj, previous, str(e), now)
        await ctx.event(obj, False, "Initialized", f"plan frozen; {_plan(status)}")
    return await _execute(ctx, scope, obj, run, status, previous, now)


def _plan(status: Obj) -> str:
    stages = (status.get("rollout") or {}).get("stages") or []
    return ", ".join(f"{s['name']}: {len(s.get('clusters') or [])} clusters" for s in stages)


async def _initializing(
    ctx: Context, scope: nm.Scope, obj: Any, prev: Obj, why: str, now: datetime
) -> Result:
    gen = obj.metadata.generation
    conditions = [
        run_status.cond(
            prev.get("conditions"),
            "Initialized",
            "Unknown",
            "UpdateRunInitializing",
            f"waiting: {why}",
            gen,
            st.fmt(now),
        )
    ]
    await write_status(ctx.client, kinds.resource(scope.run), obj, {**prev, "conditions": conditions})
    return Result(requeue_after=RETRY)


async def _init_failed(ctx: Context, scope: nm.Scope, obj: Any, prev: Obj, why: str, now: datetime) -> Result:
    gen = obj.metadata.generation
    conditions = [
        run_status.cond(None, "Initialized", "False", "UpdateRunInitializedFailed", why, gen, st.fmt(now))
    ]
    await write_status(ctx.client, kinds.resource(scope.run), obj, {**prev, "conditions": conditions})
    await ctx.event(obj, True, "InitializationFailed", why)
    return Result()


async def _execute(
    ctx: Context, scope: nm.Scope, obj: Any, run: Any, status: dict[str, Any], previous: Obj, now: datetime
) -> Result:
    namespace, state = run.metadata.namespace, run.spec.state
    snap = ctx.cache.get(scope.snapshot, namespace, status["snapshot"]["name"])
    if snap is None:
        return await _fail(
            ctx,
            scope,
            obj,
            status,
            previous,
            f"resource snapshot {status['snapshot']['name']} was deleted",
            now,
        )
    frozen = StagedUpdateStrategySpec.model_validate(status["stagedUpdateStrategySnapshot"])
    content = execution.Content(
        index=str(status["resourceSnapshotIndexUsed"]),
        hash=str(status["snapshot"]["hash"]),
        objects=snapshots.resources(snap),
        inventory=scope.inventory(namespace, run.spec.placement_name),
    )
    placement = ctx.cache.get(scope.placement, namespace, run.spec.placement_name)
    fleet, names = (
        run_init.fleet_of(ctx, run_init.parse(placement, scope.placement)) if placement else (None, {})
    )
    if fleet is None:
        fleet = m.Fleet.of(())  # the placement is gone: nobody is awaited, the plan stays as frozen
    record = engine_state.load(status["rollout"])
    ledger = {c: dict(e) for c, e in (status.get("deliveries") or {}).items()}
    seen = {n: dict(v) for n, v in (status.get("approvals") or {}).items()}
    requests = approvals.of_run(ctx, scope, namespace, run.metadata.name)
    in_flight = False
    wake: float | None = None
    effects: list[fx.Effect] = []
    if state == "Run":
        record = _resumed(record, status, now)
        granted = await _approvals(ctx, scope, namespace, requests, seen, now)
        spec = run_init.rollout_spec(run, scope, frozen, content.hash)
        drive = await execution.drive(ctx, spec, fleet, record, ledger, content, granted, now)
        record, ledger, effects = drive.decision.status, drive.ledger, drive.effects
        after = drive.decision.requeue_after
        wake = None if after is None else max(after.total_seconds(), 0.05)
        await _act(ctx, scope, obj, effects, requests, seen, now)
        status.pop("stoppedAt", None)
    elif state == "Stop":
        await execution.observe(ctx, record, fleet, ledger, content)
        in_flight = _in_flight(record, ledger, fleet.names)
        status.setdefault("stoppedAt", st.fmt(now))
    deletions = dict(status.get("deletions") or {})
    if state == "Run" and record.phase is st.RolloutPhase.SUCCEEDED:
        await _delete_stage(ctx, status.get("deletionClusters") or [], deletions, content.inventory, now)
    view = run_status.View(
        kind=scope.run,
        generation=run.metadata.generation,
        run=run.metadata.name,
        strategy=frozen,
        record=record,
        ledger=ledger,
        approvals=seen,
        deletion_clusters=tuple(status.get("deletionClusters") or ()),
        deletions=deletions,
        mode=state,
        in_flight=in_flight,
        stuck=_stuck(run, record, ledger, now),
        display=lambda c: names.get(c, c.partition("/")[2] or c),
        now=now,
        previous=status,
    )
    body = {
        **status,
        **run_status.build(view),
        "rollout": engine_state.dump(record),
        "deliveries": ledger,
        "approvals": seen,
        "deletions": deletions,
    }
    written = await write_status(ctx.client, kinds.resource(scope.run), obj, body)
    if written is StatusWrite.CONFLICT:
        return Result(requeue=True)
    await _events(ctx, obj, effects, previous, body)
    return _requeue(state, record, in_flight, body, wake)


def _resumed(record: st.RolloutStatus, status: Obj, now: datetime) -> st.RolloutStatus:
    """The progress deadline does not run while a run is stopped."""
    if not status.get("stoppedAt") or record.current_stage is None:
        return record
    stage = record.current_stage
    if stage.last_progress_at is None:
        return record
    return record.with_stage(record.current, replace(stage, last_progress_at=now))


def _in_flight(record: st.RolloutStatus, ledger: Obj, fleet_names: frozenset[str]) -> bool:
    stage = record.current_stage
    if stage is None:
        return False
    return any(c in fleet_names and not (ledger.get(c) or {}).get("doneAt") for c in stage.started)


def _stuck(run: Any, record: st.RolloutStatus, ledger: Obj, now: datetime) -> str:
    stage = record.current_stage
    if stage is None or stage.phase is not st.StagePhase.PROGRESSING:
        return ""
    if stage.failed:
        cluster, why = stage.failed[0]
        return f"cluster {cluster} failed: {why}; retrying"
    limit = run_init.stuck_after(run)
    for cluster in stage.started:
        entry = ledger.get(cluster) or {}
        applied = entry.get("appliedAt")
        if applied and not entry.get("doneAt") and now - _parse(applied) >= limit:
            why = entry.get("message", "")
            return f"cluster {cluster} has not become available for more than {limit}: {why}"
    return ""


def _parse(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


async def _approvals(
    ctx: Context,
    scope: nm.Scope,
    namespace: str | None,
    requests: Obj,
    seen: dict[str, dict[str, Any]],
    now: datetime,
) -> dict[str, datetime]:
    """Approvals granted so far (first-seen times kept in status); acknowledges new ones."""
    granted: dict[str, datetime] = {}
    for name, req in requests.items():
        entry = seen.setdefault(name, {})
        entry.setdefault("createdAt", st.fmt(now))
        if approvals.approved(req) or approvals.accepted(req):
            entry.setdefault("approvedAt", st.fmt(now))
            if not approvals.accepted(req):
                await approvals.accept(ctx, scope, name, namespace, now)
    for name, entry in seen.items():
        if entry.get("approvedAt"):  # accepted approvals stand even if the request is deleted
            granted[name] = _parse(str(entry["approvedAt"]))
    return granted


async def _act(
    ctx: Context,
    scope: nm.Scope,
    obj: Any,
    effects: list[fx.Effect],
    requests: Obj,
    seen: dict[str, dict[str, Any]],
    now: datetime,
) -> None:
    for effect in effects:
        if isinstance(effect, fx.RequestApproval) and effect.approval_id not in requests:
            await approvals.ensure(ctx, scope, obj, effect.stage, effect.approval_id)
            seen.setdefault(effect.approval_id, {}).setdefault("createdAt", st.fmt(now))


async def _events(ctx: Context, obj: Any, effects: list[fx.Effect], previous: Obj, body: Obj) -> None:
    for effect in effects:
        if isinstance(effect, fx.Event):
            warning = effect.reason in ("ClusterFailed", "ProgressDeadlineExceeded", "ClusterLeft")
            await ctx.event(obj, warning, effect.reason, effect.message)
    old, new = _cond(previous, "Progressing") or {}, _cond(body, "Progressing") or {}
    if new.get("reason") == "UpdateRunStuck" and old.get("reason") != "UpdateRunStuck":
        await ctx.event(obj, True, "UpdateRunStuck", str(new.get("message", "")))


async def _delete_stage(
    ctx: Context, clusters: list[str], deletions: dict[str, Any], inventory: str, now: datetime
) -> None:
    todo = [c for c in clusters if not (deletions.get(c) or {}).get("doneAt")]
    results = await asyncio.gather(*(executor.remove(ctx, c, inventory=inventory) for c in todo))
    for cluster, result in zip(todo, results, strict=True):
        entry = deletions.setdefault(cluster, {"startedAt": st.fmt(now)})
        entry["message"] = result.message
        if result.ok:
            entry["doneAt"] = st.fmt(ctx.clock())


async def _fail(
    ctx: Context, scope: nm.Scope, obj: Any, status: Obj, previous: Obj, why: str, now: datetime
) -> Result:
    gen = obj.metadata.generation
    prev = previous.get("conditions")
    conditions = [c for c in status.get("conditions") or [] if c.get("type") == "Initialized"]
    conditions += [
        run_status.cond(prev, "Progressing", "False", "UpdateRunFailed", why, gen, st.fmt(now)),
        run_status.cond(prev, "Succeeded", "False", "UpdateRunFailed", why, gen, st.fmt(now)),
    ]
    await write_status(ctx.client, kinds.resource(scope.run), obj, {**status, "conditions": conditions})
    return Result()


def _requeue(state: str, record: st.RolloutStatus, in_flight: bool, body: Obj, wake: float | None) -> Result:
    if terminal(body) or state == "Initialize":
        return Result()
    if state == "Stop":
        return Result(requeue_after=IN_FLIGHT_POLL) if in_flight else Result()
    if record.phase is st.RolloutPhase.SUCCEEDED:
        return Result(requeue_after=RETRY)  # the deletion stage is retrying an unreachable cluster
    return Result(requeue_after=wake)

"""Initialize a staged update run: resolve placement, strategy, snapshot and clusters, freeze the plan.

Objects that may still appear (a placement or strategy created in the same `kubectl apply`, a
snapshot being cut) make initialization wait and retry; a definite error (placement not External,
a snapshot index beyond the history) fails it for good, as upstream's abort does (ADR 0060). The
frozen plan is written as soon as it is made, before anything is delivered.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from fleetwave import translate
from fleetwave.api.conditions import cond
from fleetwave.api.kubefleet import StagedUpdateStrategySpec
from fleetwave.api.objects import Obj
from fleetwave.controllers.kubefleet import history, overrides, parsed, snapshots, unhonoured
from fleetwave.controllers.kubefleet import naming as nm
from fleetwave.controllers.shared import engine_state
from fleetwave.controllers.shared.context import Context
from fleetwave.core import batching
from fleetwave.core import status as st
from fleetwave.kube.status import StatusWrite, Versioned, normalized
from fleetwave.runtime.controller import Result
from fleetwave.translate import stage_membership

POLL = timedelta(seconds=2)  # only the frozen plan is read from the spec made with it
RETRY_SECONDS = 2.0


class Retry(Exception):
    """Not ready to initialize yet (the message says what is missing)."""


class Abort(Exception):
    """Initialization failed for good."""


def placement_of(ctx: Context, scope: nm.Scope, run: parsed.Run) -> parsed.Placement:
    raw = ctx.cache.get(scope.placement, run.metadata.namespace, run.spec.placement_name)
    if raw is None:
        raise Retry(f"{scope.placement} {run.spec.placement_name} not found")
    placement = parsed.placement(raw, scope.placement)
    refused = unhonoured.refusal(placement.spec)
    if refused:  # an edit of the placement wakes the run
        raise Retry(f"{scope.placement} {run.spec.placement_name}: {refused}")
    return placement


def _snapshot(ctx: Context, scope: nm.Scope, run: parsed.Run, placement: parsed.Placement) -> Obj:
    ns = run.metadata.namespace
    mine = snapshots.of_placement(ctx.cache.list(scope.snapshot), placement.metadata.name, ns)
    wanted = run.spec.resource_snapshot_index
    if wanted is None:
        if not mine:
            raise Retry(f"placement {placement.metadata.name} has no resource snapshot yet")
        return mine[-1]
    found = snapshots.find(mine, int(wanted))
    if found is not None:
        return found
    newest = snapshots.index_of(mine[-1]) if mine else None
    if newest is not None and int(wanted) <= newest:
        raise Abort(
            f"resource snapshot index {wanted} of placement {placement.metadata.name} no longer exists"
            f" (beyond revisionHistoryLimit {placement.spec.revision_history_limit})"
        )
    raise Retry(f"resource snapshot index {wanted} of placement {placement.metadata.name} not found yet")


def _held_elsewhere(ctx: Context, scope: nm.Scope, run: parsed.Run, placement: parsed.Placement) -> set[str]:
    ns, name = run.metadata.namespace, placement.metadata.name
    ledgers = [
        r.get("status") or {}
        for r in ctx.cache.list(scope.run)
        if (r.get("metadata") or {}).get("namespace") == ns
        and (r.get("spec") or {}).get("placementName") == name
        and (r.get("metadata") or {}).get("name") != run.metadata.name
    ]
    own = ctx.cache.get(scope.placement, ns, name)
    ledgers.append((own or {}).get("status") or {})
    return history.holding(ledgers)


def _frozen_strategy(ctx: Context, scope: nm.Scope, run: parsed.Run) -> StagedUpdateStrategySpec:
    name = run.spec.staged_rollout_strategy_name
    raw = ctx.cache.get(scope.strategy, run.metadata.namespace, name)
    if raw is None:
        raise Retry(f"{scope.strategy} {name} not found")
    return parsed.strategy(raw, scope.strategy).spec


def initialize(ctx: Context, scope: nm.Scope, run: parsed.Run, now: datetime) -> dict[str, Any]:
    """The status fields a freshly initialized run starts from; raises Retry or Abort."""
    placement = placement_of(ctx, scope, run)
    if placement.spec.strategy.type != "External":
        raise Abort(f"placement {placement.metadata.name} does not use strategy type External")
    frozen = _frozen_strategy(ctx, scope, run)
    snapshot = _snapshot(ctx, scope, run, placement)
    fleet, names = parsed.fleet_of(ctx, placement)
    try:
        spec = parsed.rollout_spec(run, scope, frozen, snapshots.hash_of(snapshot), poll=POLL)
    except translate.TranslateError as e:
        raise Abort(str(e)) from e
    misplaced = stage_membership.problem(spec.stages, fleet, names)
    if misplaced:  # upstream's abort: a run must never skip or double-update a picked cluster
        raise Abort(misplaced)
    plan = batching.freeze_plan(spec, fleet, now)
    # The overrides are pinned with the snapshot: what each cluster gets is fixed for the whole run.
    name, ns = placement.metadata.name, placement.metadata.namespace
    per = overrides.for_placement(ctx.cache, snapshots.resources(snapshot), name, ns, fleet)
    pinned = overrides.pins(per, fleet.names) if per.every else {}
    apply_strategy = placement.spec.strategy.apply_strategy
    return {
        "policySnapshotIndexUsed": "0",
        "policyObservedClusterCount": len(fleet.names),
        "resourceSnapshotIndexUsed": str(snapshots.index_of(snapshot)),
        "appliedStrategy": apply_strategy.model_dump(mode="json", by_alias=True) if apply_strategy else {},
        "stagedUpdateStrategySnapshot": frozen.model_dump(mode="json", by_alias=True, exclude_none=True),
        "rollout": engine_state.dump(plan),
        "snapshot": {"name": snapshot["metadata"]["name"], "hash": snapshots.hash_of(snapshot)},
        "deletionClusters": sorted(_held_elsewhere(ctx, scope, run, placement) - fleet.names),
        "deliveries": {},
        "approvals": {},
        "deletions": {},
        **({"overrideSnapshots": pinned} if pinned else {}),
        "conditions": [_initialized(scope, run, now)],
    }


def _initialized(scope: nm.Scope, run: parsed.Run, now: datetime) -> dict[str, Any]:
    message = f"{scope.run} initialized successfully"
    reason = "UpdateRunInitializedSuccessfully"
    return cond(None, "Initialized", "True", reason, message, run.metadata.generation, st.fmt(now))


@dataclass(frozen=True, slots=True)
class Started:
    """A run just initialized: its status with the frozen plan, and the Event that announces it.
    A deferred plan is not written yet (`current.stored` is what the server holds): the first
    pass writes it with the first stage's start, one status write instead of two, and announces
    it once that write is made."""

    current: Versioned
    announce: Callable[[], Awaitable[None]]

    @property
    def deferred(self) -> bool:
        return self.current.stored is not None


async def start(
    ctx: Context, scope: nm.Scope, obj: Any, run: parsed.Run, current: Versioned, *, defer: bool = False
) -> Started | Result:
    """Initialize the frozen plan (written at once unless `defer`); a run not ready yet says what
    it waits for."""
    now = ctx.clock()
    try:
        fields = initialize(ctx, scope, run, now)
    except Retry as e:
        return await _waiting(ctx, scope, obj, current, str(e), now)
    except Abort as e:
        return await failed(ctx, scope, obj, current, str(e))
    stages = fields["rollout"]["stages"]
    plan = ", ".join(f"{s['name']}: {len(s.get('clusters') or [])} clusters" for s in stages)

    async def announce() -> None:
        await ctx.event(obj, False, "Initialized", f"plan frozen; {plan}")

    body = {**current.status, **fields}
    if defer:
        return Started(replace(current, status=normalized(body), stored=current.status), announce)
    written, current = await ctx.write_status(scope.run, current, body)
    if written is StatusWrite.CONFLICT:
        return Result(requeue=True)
    await announce()
    return Started(current, announce)


async def _waiting(
    ctx: Context, scope: nm.Scope, obj: Any, current: Versioned, why: str, now: datetime
) -> Result:
    previous = current.status.get("conditions")
    gen = obj.metadata.generation
    waiting = cond(
        previous, "Initialized", "Unknown", "UpdateRunInitializing", f"waiting: {why}", gen, st.fmt(now)
    )
    await ctx.write_status(scope.run, current, {**current.status, "conditions": [waiting]})
    return Result(requeue_after=RETRY_SECONDS)


async def failed(ctx: Context, scope: nm.Scope, obj: Any, current: Versioned, why: str) -> Result:
    gen, at = obj.metadata.generation, st.fmt(ctx.clock())
    failure = cond(None, "Initialized", "False", "UpdateRunInitializedFailed", why, gen, at)
    await ctx.write_status(scope.run, current, {**current.status, "conditions": [failure]})
    await ctx.event(obj, True, "InitializationFailed", why)
    return Result()

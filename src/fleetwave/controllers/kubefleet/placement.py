"""ClusterResourcePlacement / ResourcePlacement reconcile: select, snapshot, and (RollingUpdate) roll out.

Every change of the selected content cuts a new indexed snapshot. With strategy External the runs
carry snapshots to clusters; the default RollingUpdate carries the newest one to every picked
cluster itself, at most maxUnavailable (rounded up) at a time, through the same engine and ledger.
Status: selected resources, Scheduled, and Available once every picked cluster holds one index.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from fleetwave.api import codec
from fleetwave.api.conditions import cond
from fleetwave.api.kubefleet import PlacementPolicy
from fleetwave.api.objects import Obj
from fleetwave.controllers.fleet import members
from fleetwave.controllers.kubefleet import (
    apply_rules,
    history,
    overrides,
    parsed,
    placement_delete,
    placement_rolling,
    placement_status,
    selection,
    snapshots,
    unhonoured,
)
from fleetwave.controllers.kubefleet import naming as nm
from fleetwave.controllers.kubefleet.executor import DeliveryMemory
from fleetwave.controllers.shared.context import Context, as_dict
from fleetwave.controllers.shared.versioned_memo import VersionedMemo
from fleetwave.core import model as m
from fleetwave.core import status as st
from fleetwave.kube import ops
from fleetwave.kube.status import StatusWrite, Versioned
from fleetwave.runtime.controller import Result

SNAPSHOT_RETRY_SECONDS = 1.0


def _picked(ctx: Context, scope: nm.Scope, obj: Any) -> frozenset[str]:
    """The clusters the placement picks now; none when it cannot be read."""
    try:
        placement = parsed.placement(as_dict(obj), scope.placement)
    except codec.ManifestError:
        return frozenset()
    return parsed.fleet_of(ctx, placement)[0].names


async def reconcile(ctx: Context, memory: DeliveryMemory, scope: nm.Scope, key: str) -> Result:
    namespace, name = nm.split_key(key)
    obj = ctx.cache.obj(scope.placement, namespace, name)
    if obj is None:
        return Result()
    run_objects = _runs_of(ctx, scope, namespace, name)
    runs = [r.get("status") or {} for r in run_objects]
    ended = await placement_delete.guard(ctx, memory, scope, obj, runs, lambda: _picked(ctx, scope, obj))
    if ended is not None:
        return ended
    current = Versioned.of(obj)
    try:
        placement = parsed.placement(as_dict(obj), scope.placement)
        selected = _select(ctx, placement, namespace)
    except (codec.ManifestError, selection.SelectionError) as e:
        return await _invalid(ctx, scope, obj, current, str(e))
    refused = unhonoured.refusal(placement.spec)
    if refused:
        return await _invalid(ctx, scope, obj, current, refused, reason="UnsupportedField")
    latest = await _snapshot(ctx, scope, placement, selected)
    if latest is None:
        return Result(requeue_after=SNAPSHOT_RETRY_SECONDS)
    fleet, names = parsed.fleet_of(ctx, placement)
    kept = {k: current.status[k] for k in ("deliveries", "deletions") if k in current.status}
    base = {**kept, "selectedResources": [_identity(o) for o in selected]}
    frame = _frame(scope, placement, fleet, names, obj.metadata.generation)
    by_runs = history.merged(_RUN_HELD.get(r, "held", _held_of) for r in run_objects)

    def render(state: Mapping[str, Any], now: datetime) -> dict[str, Any]:
        status = {**base, **state}
        held = history.merged([history.latest([status]), by_runs])  # runs win ties, as they always did
        return {**status, **placement_status.summary(frame, held, current.status, now)}

    if frame.external:
        written, _ = await ctx.write_status(scope.placement, current, render({}, ctx.clock()))
        return Result(requeue=True) if written is StatusWrite.CONFLICT else Result()
    where = _rolling_setting(ctx, scope, placement, latest, fleet, namespace, name)
    return await placement_rolling.roll(ctx, memory, where, current, render)


def _select(ctx: Context, placement: parsed.Placement, namespace: str | None) -> list[dict[str, Any]]:
    """The objects the placement's resource selectors pick (never a member cluster's kubeconfig)."""
    return selection.select(
        placement.spec,
        ctx.cache.list,
        namespace=namespace,
        credentials=members.credential_secrets(ctx.cache),
        watched=ctx.watched,
        extra=(
            *selection.envelope_kinds(ctx.api_version("ResourceEnvelope")),
            *selection.configured(ctx.placement_kinds),
        ),
    )


def _frame(
    scope: nm.Scope,
    placement: parsed.Placement,
    fleet: m.Fleet,
    names: Mapping[str, str],
    generation: int | None,
) -> placement_status.Frame:
    """What the placement's status is summarised against: who rolls out, over which clusters."""
    return placement_status.Frame(
        scope.placement,
        placement.spec.strategy.type == "External",
        fleet,
        names,
        generation,
        report_diff=apply_rules.of(placement.spec).report_diff,
        wanted=_wanted(placement.spec.policy),
    )


def _rolling_setting(
    ctx: Context,
    scope: nm.Scope,
    placement: parsed.Placement,
    latest: Obj,
    fleet: m.Fleet,
    namespace: str | None,
    name: str,
) -> placement_rolling.Setting:
    """RollingUpdate's rollout of the newest snapshot, with this placement's per-cluster overrides."""
    per = overrides.for_placement(ctx.cache, snapshots.resources(latest), name, namespace, fleet)
    return placement_rolling.setting(
        scope.placement,
        placement,
        latest,
        fleet,
        scope.inventory(namespace, name),
        poll=timedelta(seconds=ctx.judge_poll),
        overrides=per,
    )


async def _invalid(
    ctx: Context,
    scope: nm.Scope,
    obj: Any,
    current: Versioned,
    why: str,
    *,
    reason: str = "InvalidResourceSelectors",
) -> Result:
    at, gen = st.fmt(ctx.clock()), obj.metadata.generation
    scheduled = cond(
        current.status.get("conditions"),
        f"{scope.placement}Scheduled",
        "False",
        reason,
        why,
        gen,
        at,
    )
    body = {**current.status, "conditions": [scheduled]}
    await ctx.write_status(scope.placement, current, body)
    return Result()


def _identity(o: Obj) -> dict[str, Any]:
    api_version = str(o["apiVersion"])
    group, _, version = api_version.rpartition("/")
    meta = o["metadata"]
    out = {"group": group, "version": version, "kind": o["kind"], "name": meta["name"]}
    if meta.get("namespace"):
        out["namespace"] = meta["namespace"]
    return out


async def _snapshot(
    ctx: Context, scope: nm.Scope, placement: parsed.Placement, selected: list[dict[str, Any]]
) -> Obj | None:
    """The newest snapshot once it reflects `selected` (cut now if needed); None to retry."""
    ns, name = placement.metadata.namespace, placement.metadata.name
    mine = snapshots.of_placement(ctx.cache.list(scope.snapshot), name, ns)
    plan = snapshots.plan(
        mine,
        selected,
        kind=scope.snapshot,
        placement=name,
        namespace=ns,
        limit=placement.spec.revision_history_limit,
    )
    resource = ctx.resource(scope.snapshot)
    if plan.create is not None:
        try:
            # Cut in the placement's API family (snapshots.plan is pure and writes the native one).
            body = {**plan.create, "apiVersion": ctx.api_version(scope.snapshot)}
            if not await ops.create_if_absent(ctx.client, body):
                return None  # a concurrent writer cut it: the cache shows it shortly
        except ops.StatusError as e:
            if ops.code_of(e) in (403, 404):
                return None  # the placement's namespace is being deleted
            raise
    for old in plan.unmark:
        await _unmark(ctx, resource, old, ns)
    for old in plan.delete:
        await ops.delete_if_exists(ctx.client, resource, old, namespace=ns)
    return plan.create if plan.create is not None else mine[-1]


async def _unmark(ctx: Context, resource: Any, name: str, namespace: str | None) -> None:
    try:
        await ops.merge_patch(
            ctx.client,
            resource,
            name,
            {"metadata": {"labels": {nm.LATEST_LABEL: "false"}}},
            namespace=namespace,
        )
    except ops.StatusError as e:
        if not ops.is_not_found(e):
            raise


# The newest event per cluster of one version of a run's ledger: a placement's pass reads every run
# it ever had, and an ended run's ledger never changes (at 100 clusters and a dozen runs, reading
# them again at every render was a fifth of the placement pass's CPU).
_RUN_HELD: VersionedMemo[dict[str, history.Held]] = VersionedMemo(4096)


def _held_of(run: Mapping[str, Any]) -> dict[str, history.Held]:
    return history.latest([run.get("status") or {}])


def _runs_of(ctx: Context, scope: nm.Scope, namespace: str | None, placement: str) -> list[Obj]:
    return [
        r
        for r in ctx.cache.list(scope.run)
        if (r.get("metadata") or {}).get("namespace") == namespace
        and (r.get("spec") or {}).get("placementName") == placement
    ]


def _wanted(policy: PlacementPolicy | None) -> int | None:
    """How many clusters a PickN placement asks for (None for PickAll and PickFixed)."""
    if policy is None or policy.placement_type != "PickN":
        return None
    return int(policy.number_of_clusters or 0)

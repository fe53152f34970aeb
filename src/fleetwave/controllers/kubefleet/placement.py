"""ClusterResourcePlacement / ResourcePlacement reconcile: select, snapshot, and (RollingUpdate) roll out.

Every change of the selected content cuts a new indexed snapshot. With strategy External the runs
carry snapshots to clusters; the default RollingUpdate carries the newest one to every picked
cluster itself, at most maxUnavailable (rounded up) at a time, through the same engine and ledger.
Status: selected resources, Scheduled, and Available once every picked cluster holds one index.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping
from typing import Any

from lightkube import ApiError, codecs
from lightkube.types import PatchType

from fleetwave.api import codec
from fleetwave.controllers import engine_state
from fleetwave.controllers.context import Context, as_dict
from fleetwave.controllers.kubefleet import execution, executor, history, run_init, selection, snapshots
from fleetwave.controllers.kubefleet import naming as nm
from fleetwave.controllers.kubefleet.run_status import cond
from fleetwave.core import batching
from fleetwave.core import model as m
from fleetwave.core import status as st
from fleetwave.kube import kinds
from fleetwave.kube.status import StatusWrite, write_status
from fleetwave.runtime.controller import Result

Obj = Mapping[str, Any]


async def reconcile(ctx: Context, scope: nm.Scope, key: str) -> Result:
    namespace, name = nm.split_key(key)
    obj = ctx.cache.obj(scope.placement, namespace, name)
    if obj is None or obj.metadata.deletionTimestamp:
        return Result()
    raw = as_dict(obj)
    previous = raw.get("status") or {}
    now, gen = ctx.clock(), obj.metadata.generation
    try:
        placement = run_init.parse(raw, scope.placement)
        selected = selection.select(placement.spec, ctx.cache.list, namespace=namespace)
    except (codec.ManifestError, selection.SelectionError) as e:
        conditions = [
            cond(
                previous.get("conditions"),
                f"{scope.placement}Scheduled",
                "False",
                "InvalidResourceSelectors",
                str(e),
                gen,
                st.fmt(now),
            )
        ]
        await write_status(
            ctx.client, kinds.resource(scope.placement), obj, {**previous, "conditions": conditions}
        )
        return Result()
    latest = await _snapshot(ctx, scope, placement, selected)
    if latest is None:
        return Result(requeue_after=1.0)
    fleet, names = run_init.fleet_of(ctx, placement)
    status: dict[str, Any] = {
        "selectedResources": [_identity(o) for o in selected],
        "deliveries": previous.get("deliveries") or {},
        "deletions": previous.get("deletions") or {},
    }
    wake: float | None = None
    if placement.spec.strategy.type != "External":
        status, wake = await _rolling(ctx, scope, placement, latest, fleet, {**previous, **status})
    status.update(_summary(ctx, scope, placement, fleet, names, status, previous, gen, now))
    written = await write_status(ctx.client, kinds.resource(scope.placement), obj, status)
    if written is StatusWrite.CONFLICT:
        return Result(requeue=True)
    return Result(requeue_after=wake)


def _identity(o: Obj) -> dict[str, Any]:
    api_version = str(o["apiVersion"])
    group, _, version = api_version.rpartition("/")
    meta = o["metadata"]
    out = {"group": group, "version": version, "kind": o["kind"], "name": meta["name"]}
    if meta.get("namespace"):
        out["namespace"] = meta["namespace"]
    return out


async def _snapshot(
    ctx: Context, scope: nm.Scope, placement: Any, selected: list[dict[str, Any]]
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
    resource = kinds.resource(scope.snapshot)
    if plan.create is not None:
        try:
            await ctx.client.create(codecs.from_dict(plan.create))
        except ApiError as e:
            if e.status.code in (403, 404, 409):
                return None  # a concurrent writer, or the placement's namespace is being deleted
            raise
    for old in plan.unmark:
        patch = {"metadata": {"labels": {nm.LATEST_LABEL: "false"}}}
        await _ignore_missing(
            ctx.client.patch(resource, old, patch, namespace=ns, patch_type=PatchType.MERGE)
        )
    for old in plan.delete:
        await _ignore_missing(ctx.client.delete(resource, old, namespace=ns))
    return plan.create if plan.create is not None else mine[-1]


async def _ignore_missing(call: Any) -> None:
    try:
        await call
    except ApiError as e:
        if e.status.code != 404:
            raise


async def _rolling(
    ctx: Context, scope: nm.Scope, placement: Any, latest: Obj, fleet: m.Fleet, status: dict[str, Any]
) -> tuple[dict[str, Any], float | None]:
    ns, name = placement.metadata.namespace, placement.metadata.name
    digest = snapshots.hash_of(latest)
    rolling = placement.spec.strategy.rolling_update
    limit = _max_unavailable(rolling.max_unavailable if rolling else "25%", len(fleet.names))
    spec = m.RolloutSpec(
        name=name,
        revision=m.Revision(content_hash=digest, stages_hash=batching.compute_stages_hash(())),
        stages=(m.StageSpec("rollout", m.Selector(), max_in_flight=m.MaxInFlight(limit)),),
        poll_interval=run_init.POLL,
    )
    record = status.get("rollout")
    previous = engine_state.load(record) if record else None
    content = execution.Content(
        str(snapshots.index_of(latest)), digest, snapshots.resources(latest), scope.inventory(ns, name)
    )
    drive = await execution.drive(ctx, spec, fleet, previous, status["deliveries"], content, {}, ctx.clock())
    deletions = await _remove_departed(ctx, drive.ledger, status["deletions"], fleet, content.inventory)
    after = drive.decision.requeue_after
    body = {
        **status,
        "rollout": engine_state.dump(drive.decision.status),
        "deliveries": drive.ledger,
        "deletions": deletions,
        "observedResourceIndex": content.index,
    }
    return body, None if after is None else max(after.total_seconds(), 0.05)


def _max_unavailable(raw: int | str, clusters: int) -> int:
    """maxUnavailable of the picked clusters; a percentage rounds up (upstream), at least 1."""
    if isinstance(raw, str) and raw.endswith("%"):
        return max(1, math.ceil(int(raw[:-1]) * clusters / 100))
    return max(1, int(raw))


async def _remove_departed(
    ctx: Context, ledger: dict[str, Any], deletions: Mapping[str, Any], fleet: m.Fleet, inventory: str
) -> dict[str, Any]:
    """RollingUpdate: clusters no longer picked lose the content right away."""
    out = dict(deletions)
    gone = [c for c in history.holding([{"deliveries": ledger, "deletions": out}]) if c not in fleet.names]
    results = await asyncio.gather(*(executor.remove(ctx, c, inventory=inventory) for c in gone))
    for cluster, result in zip(gone, results, strict=True):
        if result.ok:
            out[cluster] = {
                "startedAt": st.fmt(ctx.clock()),
                "doneAt": st.fmt(ctx.clock()),
                "message": result.message,
            }
    return out


def _summary(
    ctx: Context,
    scope: nm.Scope,
    placement: Any,
    fleet: m.Fleet,
    names: Mapping[str, str],
    status: Obj,
    previous: Obj,
    gen: int | None,
    now: Any,
) -> dict[str, Any]:
    ns, name = placement.metadata.namespace, placement.metadata.name
    ledgers = [status] + [
        r.get("status") or {}
        for r in ctx.cache.list(scope.run)
        if (r.get("metadata") or {}).get("namespace") == ns
        and (r.get("spec") or {}).get("placementName") == name
    ]
    held = history.latest(ledgers)
    index, available = history.common_index(held, sorted(fleet.names))
    prev, at, prefix = previous.get("conditions"), st.fmt(now), scope.placement
    picked = ", ".join(sorted(names.get(c, c) for c in fleet.names))
    conditions = [
        cond(
            prev,
            f"{prefix}Scheduled",
            "True",
            "SchedulingPolicyFulfilled",
            f"picked {len(fleet.names)} clusters: {picked}",
            gen,
            at,
        )
    ]
    if available and fleet.names:
        conditions.append(
            cond(
                prev,
                f"{prefix}Available",
                "True",
                "ResourcesAvailable",
                f"every picked cluster holds resource snapshot index {index}",
                gen,
                at,
            )
        )
    else:
        why = (
            "the rollout is controlled by staged update runs"
            if placement.spec.strategy.type == "External"
            else "rolling out"
        )
        conditions.append(cond(prev, f"{prefix}Available", "Unknown", "RolloutInProgress", why, gen, at))
    placement_statuses = [
        {"clusterName": names.get(c, c), "observedResourceIndex": held[c].index, "available": held[c].done}
        for c in sorted(fleet.names)
        if c in held and held[c].index is not None
    ]
    out: dict[str, Any] = {"conditions": conditions, "placementStatuses": placement_statuses}
    out["observedResourceIndex"] = index
    return out

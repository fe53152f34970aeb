"""`strategy.deleteStrategy`: what deleting a placement does to the members holding its content.

A placement carries a finalizer. When it is deleted, with `propagationPolicy: Delete` (the default, as
upstream) every cluster that holds its content — read from its own ledger and every run's — has the
placement's inventory withdrawn (every cluster a rollout started too, see `reached`, and every
cluster the placement picks, as upstream withdraws from every bound cluster); with
`Abandon` the content stays where it is. Only objects fleetwave
applied for this placement carry its inventory label, so objects it never took over are never
deleted. A member that cannot be reached keeps its content and a Warning Event names it: a deletion
never waits forever on a cluster that is gone (as ClusterSummary withdrawal, ADR 0045).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from fleetwave.api.objects import Obj
from fleetwave.controllers.kubefleet import executor, history, ledger
from fleetwave.controllers.kubefleet import naming as nm
from fleetwave.controllers.shared import engine_state
from fleetwave.controllers.shared.context import Context, as_dict
from fleetwave.kube import ops
from fleetwave.runtime.controller import Result

FINALIZER = "fleetwave.io/placement-cleanup"


def abandons(raw: Obj) -> bool:
    strategy = ((raw.get("spec") or {}).get("strategy") or {}).get("deleteStrategy") or {}
    return strategy.get("propagationPolicy") == "Abandon"


async def guard(
    ctx: Context,
    memory: executor.DeliveryMemory,
    scope: nm.Scope,
    obj: Any,
    runs: Iterable[Obj],
    picked: Callable[[], Iterable[str]] = tuple,
) -> Result | None:
    """Keep the finalizer on a live placement; on deletion, withdraw (or abandon) and let it go.
    `picked`: the clusters the placement picks now (asked only on deletion): its content may be on
    them though no record says so (a run deleted before its placement takes its ledger with it).
    A Result ends the reconcile."""
    raw = as_dict(obj)
    meta = raw.get("metadata") or {}
    finalizers = list(meta.get("finalizers") or [])
    if not meta.get("deletionTimestamp"):
        if FINALIZER in finalizers:
            return None
        await _set_finalizers(ctx, scope, meta, [*finalizers, FINALIZER])
        return Result(requeue=True)
    if FINALIZER not in finalizers:
        return Result()
    if not abandons(raw):
        await _withdraw(
            ctx, memory, scope, obj, raw, set(reached([raw.get("status") or {}, *runs])) | set(picked())
        )
    released = await _set_finalizers(ctx, scope, meta, [f for f in finalizers if f != FINALIZER])
    return Result() if released else Result(requeue=True)


async def _withdraw(
    ctx: Context, memory: executor.DeliveryMemory, scope: nm.Scope, obj: Any, raw: Obj, clusters: set[str]
) -> None:
    meta = raw["metadata"]
    inventory = scope.inventory(meta.get("namespace"), str(meta["name"]))
    left = []
    for cluster in sorted(clusters):
        outcome = await executor.remove(ctx, memory, cluster, inventory=inventory)
        if not outcome.ok:
            left.append(f"{cluster}: {outcome.message}")
    if left:
        message = "deleted with propagationPolicy Delete, but content was left on: " + "; ".join(left)
        await ctx.event(obj, True, "WithdrawSkipped", message)


def reached(statuses: Iterable[Obj]) -> set[str]:
    """Every cluster the placement's content may be on: what the ledgers say it holds, and every
    cluster a rollout started (a delivery is recorded only after it was applied, so a placement
    deleted in between would otherwise leave that cluster's content behind). Withdrawing from a
    cluster that holds nothing is harmless."""
    statuses = list(statuses)
    out = history.holding(statuses)
    for status in statuses:
        raw = status.get("rollout")
        if not isinstance(raw, Mapping):
            continue
        try:
            out |= ledger.started(engine_state.load(dict(raw)))
        except (KeyError, TypeError, ValueError):
            continue  # a damaged record: the ledgers above still count
    return out


async def _set_finalizers(ctx: Context, scope: nm.Scope, meta: Obj, finalizers: list[str]) -> bool:
    """Guarded by resourceVersion; False when the placement was edited since it was read (a
    status write of its run, say): the reconcile is retried on the newer version, without an
    error in the log for an everyday race."""
    body = {"metadata": {"finalizers": finalizers, "resourceVersion": meta.get("resourceVersion")}}
    placement, namespace = ctx.resource(scope.placement), meta.get("namespace")
    return await ops.merge_patch_unless_changed(
        ctx.client, placement, str(meta["name"]), body, namespace=namespace
    )

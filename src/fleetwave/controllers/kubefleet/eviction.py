"""ClusterResourcePlacementEviction reconcile: decide once, write the verdict (ADR 0107).

Thin: the facts come from the cache (the placement, its picks and its delivery ledger, the members)
and one read of the disruption budget from the API server (a budget created a moment before the
eviction must not be missed by a cache behind it, as KubeFleet reads it); `evictions.decide` is
pure. The verdict is the only write: an executed eviction makes the placement leave the cluster
out of its picks, and the placement's own controller withdraws its content there.

One worker: evictions of one placement are decided one after the other, each counting what the
previous ones took away (a placement's evictions are on its shard, ADR 0067).
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from fleetwave.api import codec
from fleetwave.api.evictions import PlacementDisruptionBudgetSpec
from fleetwave.controllers.fleet import members
from fleetwave.controllers.kubefleet import evictions, history, parsed
from fleetwave.controllers.kubefleet import naming as nm
from fleetwave.controllers.shared.context import Context, as_dict
from fleetwave.controllers.shared.status_writer import Whose
from fleetwave.core import status as st
from fleetwave.kube import ops
from fleetwave.kube.status import StatusWrite, Versioned
from fleetwave.runtime.controller import Result

# How soon an eviction waits again while the cache lags this process's verdict on an eviction of the
# same placement.
OWN_WRITE_WAIT = 0.2


async def reconcile(ctx: Context, key: str) -> Result:
    obj = ctx.cache.obj(evictions.EVICTION, None, key)
    if obj is None:
        return Result()
    raw = as_dict(obj)
    if evictions.terminal(raw.get("status")):
        return Result()  # decided once, never again
    spec = raw.get("spec") or {}
    placement_name, cluster_name = str(spec.get("placementName", "")), str(spec.get("clusterName", ""))
    if _behind_own_verdicts(ctx, placement_name):
        return Result(requeue_after=OWN_WRITE_WAIT)
    facts = await _facts(ctx, placement_name, cluster_name)
    verdict = evictions.decide(facts)
    current = Versioned.of(obj)
    at, generation = st.fmt(ctx.clock()), obj.metadata.generation
    body = {**current.status, "conditions": evictions.conditions(verdict, current.status, generation, at)}
    written, _ = await ctx.write_status(evictions.EVICTION, current, body)
    return Result(requeue=True) if written is StatusWrite.CONFLICT else Result()


def _behind_own_verdicts(ctx: Context, placement_name: str) -> bool:
    """Whether the cache still lacks a verdict this process wrote on an eviction of the placement:
    another one (it may have taken a cluster away) or this one (decided already: never twice)."""
    by_placement = ctx.cache.memo(
        "evictions by placement",
        evictions.EVICTION,
        lambda: _by_placement(ctx.cache.list(evictions.EVICTION)),
    )
    return any(
        ctx.statuses.behind(Whose.of(evictions.EVICTION, None, name), version)
        for name, version in by_placement.get(placement_name, ())
    )


def _by_placement(objs: list[dict[str, Any]]) -> dict[str, list[tuple[str, str | None]]]:
    """Placement name -> (name, resourceVersion) of its evictions."""
    out: dict[str, list[tuple[str, str | None]]] = {}
    for obj in objs:
        meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
        version = meta.get("resourceVersion")
        out.setdefault(str(spec.get("placementName")), []).append((str(meta.get("name")), version))
    return out


async def _facts(ctx: Context, placement_name: str, cluster_name: str) -> evictions.Facts:
    kind = nm.CLUSTER.placement
    raw = ctx.cache.get(kind, None, placement_name)
    if raw is None:
        return evictions.Facts(placement_name, None)
    try:
        placement = parsed.placement(raw, kind)
    except codec.ManifestError:
        return evictions.Facts(placement_name, None)  # not one the placement controller acts on
    fleet, _ = parsed.fleet_of(ctx, placement)
    every = [mb.key for mb in members.registered(ctx.cache)]
    status = raw.get("status") or {}
    budget, problem = await _budget(ctx, placement_name)
    return evictions.Facts(
        placement_name,
        placement.spec,
        deleting=bool((raw.get("metadata") or {}).get("deletionTimestamp")),
        clusters=evictions.named(cluster_name, every),
        picked=frozenset(fleet.names),
        held=history.latest([status]),
        failed=evictions.failed_clusters(status),
        budget=budget,
        budget_problem=problem,
    )


async def _budget(ctx: Context, placement_name: str) -> tuple[PlacementDisruptionBudgetSpec | None, str]:
    """The placement's disruption budget (the one of its name), read from the API server; or why it
    cannot be used (an eviction is then refused, never let through)."""
    found: Any = await ops.get(ctx.client, ctx.resource(evictions.BUDGET), placement_name)
    if found is None:
        return None, ""
    try:
        return PlacementDisruptionBudgetSpec.model_validate(as_dict(found).get("spec") or {}), ""
    except ValidationError as e:
        said = e.errors()[0]["msg"] if e.errors() else str(e)
        return None, f"Eviction is blocked: ClusterResourcePlacementDisruptionBudget {placement_name}: {said}"

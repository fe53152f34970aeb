"""Drive the engine for one rollout object (a staged update run, or a RollingUpdate placement).

observe (ledger + availability on members) -> engine.step -> apply the Deliver effects -> again,
a few times within one reconcile, so content that is available at once (ConfigMaps) moves through
a stage without waiting for a requeue. The ledger (cluster -> index, hash, applied/done times) is
kept in the object's status with the engine record; a crash between apply and status write only
makes the next reconcile apply again, which is harmless.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from fleetwave.controllers.context import Context
from fleetwave.controllers.kubefleet import executor
from fleetwave.core import effects as fx
from fleetwave.core import engine
from fleetwave.core import model as m
from fleetwave.core import status as st

PASSES = 4  # engine steps per reconcile at most; each pass needs a Deliver to warrant another


@dataclass(frozen=True, slots=True)
class Content:
    index: str
    hash: str
    objects: list[dict[str, Any]]
    inventory: str


@dataclass(slots=True)
class Drive:
    decision: fx.Decision
    effects: list[fx.Effect]
    ledger: dict[str, dict[str, Any]]


def _t(now: datetime) -> str:
    return st.fmt(now)


def started(status: st.RolloutStatus) -> set[str]:
    out = set(status.late_started)
    for stage in status.stages:
        out.update(stage.started)
    return out


async def observe(
    ctx: Context,
    status: st.RolloutStatus | None,
    fleet: m.Fleet,
    ledger: dict[str, dict[str, Any]],
    content: Content,
) -> dict[str, m.Delivery]:
    """Deliveries of `content` to the started clusters; availability is checked live until done."""
    if status is None:
        return {}
    out: dict[str, m.Delivery] = {}
    check: list[str] = []
    for cluster in sorted(started(status) & fleet.names):
        entry = ledger.get(cluster)
        if entry is None or entry.get("hash") != content.hash:
            continue  # pending: (re)delivered on the engine's Deliver
        if entry.get("doneAt"):
            out[cluster] = m.Delivery(m.DeliveryPhase.APPLIED, ready=True)
        else:
            check.append(cluster)
    results = await asyncio.gather(*(_settle(ctx, c, ledger[c], content) for c in check))
    out.update(zip(check, results, strict=True))
    return out


async def _settle(ctx: Context, cluster: str, entry: dict[str, Any], content: Content) -> m.Delivery:
    if entry.get("error"):  # retry a failed apply, level-triggered
        applied = await executor.apply(ctx, cluster, content.objects, inventory=content.inventory)
        if not applied.ok:
            entry["error"] = applied.message
            return m.Delivery(m.DeliveryPhase.FAILED, message=applied.message)
        entry.pop("error", None)
    result = await executor.available(ctx, cluster, content.objects)
    entry["message"] = result.message
    if result.ok:
        entry["doneAt"] = _t(ctx.clock())
    return m.Delivery(m.DeliveryPhase.APPLIED, ready=result.ok, message=result.message)


async def deliver(
    ctx: Context, clusters: list[str], ledger: dict[str, dict[str, Any]], content: Content
) -> None:
    results = await asyncio.gather(
        *(executor.apply(ctx, c, content.objects, inventory=content.inventory) for c in clusters)
    )
    for cluster, result in zip(clusters, results, strict=True):
        entry: dict[str, Any] = {"index": content.index, "hash": content.hash, "appliedAt": _t(ctx.clock())}
        if not result.ok:
            entry["error"] = result.message
        entry["message"] = result.message
        ledger[cluster] = entry


async def drive(
    ctx: Context,
    spec: m.RolloutSpec,
    fleet: m.Fleet,
    previous: st.RolloutStatus | None,
    ledger: Mapping[str, Mapping[str, Any]],
    content: Content,
    approvals: Mapping[str, datetime],
    now: datetime,
) -> Drive:
    book = {c: dict(e) for c, e in ledger.items()}
    effects: list[fx.Effect] = []
    for _ in range(PASSES):
        delivery = await observe(ctx, previous, fleet, book, content)
        observed = m.Observed(delivery=delivery, approvals=dict(approvals), previous=previous)
        decision = engine.step(spec, fleet, observed, now)
        effects.extend(e for e in decision.effects if not isinstance(e, fx.Deliver))
        targets = sorted({e.cluster for e in decision.effects if isinstance(e, fx.Deliver)})
        previous = decision.status
        if not targets:
            break
        await deliver(ctx, targets, book, content)
    return Drive(decision, _dedup(effects), book)


def _dedup(effects: list[fx.Effect]) -> list[fx.Effect]:
    seen: list[fx.Effect] = []
    for e in effects:
        if e not in seen:
            seen.append(e)
    return seen

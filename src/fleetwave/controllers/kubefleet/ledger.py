"""The delivery ledger of a rollout object (a staged update run, or a RollingUpdate placement).

`status.deliveries` maps cluster -> the snapshot index and hash applied there, when it was applied,
and when it became available. Entries are frozen values: every change makes a new ledger, so no two
modules ever share a dict they might both edit. Writing the ledger after an apply (never before) is
what makes a crash harmless: an entry that was never written is simply delivered again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from fleetwave.controllers.context import Context, Wake
from fleetwave.controllers.kubefleet import apply_rules, executor
from fleetwave.core import model as m
from fleetwave.core import status as st
from fleetwave.kube.status import Versioned


@dataclass(frozen=True, slots=True)
class Content:
    """What a rollout object carries: one snapshot's objects, under one inventory label."""

    index: str
    hash: str
    objects: Sequence[Mapping[str, Any]]
    inventory: str
    rules: apply_rules.ApplyRules = apply_rules.DEFAULT


@dataclass(frozen=True, slots=True)
class Delivered:
    index: str
    hash: str
    applied_at: str
    message: str = ""
    error: str | None = None
    done_at: str | None = None
    diffs: tuple[Mapping[str, Any], ...] = ()  # ReportDiff: how the member differs

    @classmethod
    def load(cls, raw: Mapping[str, Any]) -> Delivered:
        return cls(
            index=str(raw.get("index") or ""),
            hash=str(raw.get("hash") or ""),
            applied_at=str(raw.get("appliedAt") or ""),
            message=str(raw.get("message") or ""),
            error=str(raw["error"]) if raw.get("error") else None,
            done_at=str(raw["doneAt"]) if raw.get("doneAt") else None,
            diffs=tuple(d for d in raw.get("diffedPlacements") or () if isinstance(d, Mapping)),
        )

    def dump(self) -> dict[str, Any]:
        out: dict[str, Any] = {"index": self.index, "hash": self.hash, "appliedAt": self.applied_at}
        out["message"] = self.message
        if self.error:
            out["error"] = self.error
        if self.done_at:
            out["doneAt"] = self.done_at
        if self.diffs:
            out["diffedPlacements"] = [dict(d) for d in self.diffs]
        return out


Ledger = Mapping[str, Delivered]


def load(raw: Mapping[str, Any] | None) -> Ledger:
    return {c: Delivered.load(e) for c, e in (raw or {}).items() if isinstance(e, Mapping)}


def dump(ledger: Ledger) -> dict[str, dict[str, Any]]:
    return {c: e.dump() for c, e in sorted(ledger.items())}


def merged(ledger: Ledger, entries: Ledger) -> Ledger:
    return {**ledger, **entries}


def started(status: st.RolloutStatus) -> set[str]:
    out = set(status.late_started)
    for stage in status.stages:
        out.update(stage.started)
    return out


@dataclass(frozen=True, slots=True)
class Observation:
    deliveries: Mapping[str, m.Delivery]
    ledger: Ledger  # the ledger with what this observation learnt (availability, retried applies)


async def observe(
    ctx: Context,
    rollout: st.RolloutStatus | None,
    fleet: m.Fleet,
    ledger: Ledger,
    content: Content,
    wake: Wake | None = None,
) -> Observation:
    """Deliveries of `content` to the started clusters; availability is checked live until done
    (and, with `wake`, re-checked as soon as a cluster's objects change)."""
    if rollout is None:
        return Observation({}, ledger)
    deliveries: dict[str, m.Delivery] = {}
    check: list[str] = []
    for cluster in sorted(started(rollout) & fleet.names):
        entry = ledger.get(cluster)
        if entry is None or entry.hash != content.hash:
            continue  # pending: the engine asks for a Deliver again
        if entry.done_at:
            deliveries[cluster] = m.Delivery(m.DeliveryPhase.APPLIED, ready=True)
        else:
            check.append(cluster)
    settled = await asyncio.gather(*(_settle(ctx, c, ledger[c], content, _per(wake, c)) for c in check))
    deliveries.update((c, d) for c, (d, _) in zip(check, settled, strict=True))
    learnt = {c: e for c, (_, e) in zip(check, settled, strict=True)}
    return Observation(deliveries, merged(ledger, learnt))


def wake_of(ctx: Context, kind: str, current: Versioned) -> Wake | None:
    """The wake-up that re-runs the reconcile of the object `current` is the status of."""
    return ctx.wake(kind, f"{current.namespace}/{current.name}" if current.namespace else current.name)


def _per(wake: Wake | None, cluster: str) -> Wake | None:
    return None if wake is None else Wake((wake.key, cluster), wake.call)


async def _settle(
    ctx: Context, cluster: str, entry: Delivered, content: Content, wake: Wake | None
) -> tuple[m.Delivery, Delivered]:
    if entry.error:  # a failed apply is retried, level-triggered, until it succeeds
        applied = await executor.apply(
            ctx, cluster, content.objects, inventory=content.inventory, rules=content.rules
        )
        if not applied.ok:
            failed = replace(entry, error=applied.message)
            return m.Delivery(m.DeliveryPhase.FAILED, message=applied.message), failed
        entry = replace(entry, error=None, message=applied.message, diffs=applied.diffs)
    if content.rules.report_diff:  # nothing was applied: the report is the whole delivery
        entry = replace(entry, done_at=st.fmt(ctx.clock()))
        return m.Delivery(m.DeliveryPhase.APPLIED, ready=True, message=entry.message), entry
    result = await executor.available(ctx, cluster, content.objects, wake=wake)
    done = st.fmt(ctx.clock()) if result.ok else None
    entry = replace(entry, message=result.message, done_at=done)
    return m.Delivery(m.DeliveryPhase.APPLIED, ready=result.ok, message=result.message), entry


async def deliver(ctx: Context, clusters: Iterable[str], content: Content) -> Ledger:
    """Apply `content` to `clusters`; the new ledger entries, failures included (retried later)."""
    todo = sorted(set(clusters))
    results = await asyncio.gather(
        *(
            executor.apply(ctx, c, content.objects, inventory=content.inventory, rules=content.rules)
            for c in todo
        )
    )
    at = st.fmt(ctx.clock())
    return {
        cluster: Delivered(
            index=content.index,
            hash=content.hash,
            applied_at=at,
            message=result.message,
            error=None if result.ok else result.message,
            # ReportDiff applies nothing: once reported, there is nothing to wait for.
            done_at=at if result.ok and content.rules.report_diff else None,
            diffs=result.diffs,
        )
        for cluster, result in zip(todo, results, strict=True)
    }

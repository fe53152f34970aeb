"""The delivery ledger of a rollout object (a staged update run, or a RollingUpdate placement).

`status.deliveries` maps cluster -> the snapshot index and hash applied there, when it was applied,
and when it became available. Entries are frozen values: every change makes a new ledger, so no two
modules ever share a dict they might both edit. Writing the ledger after an apply (never before) is
what makes a crash harmless: an entry that was never written is simply delivered again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from fleetwave.controllers.kubefleet import apply_rules, envelopes, executor
from fleetwave.controllers.kubefleet import overrides as ov
from fleetwave.controllers.shared.context import Context, Wake
from fleetwave.core import model as m
from fleetwave.core import overrides as co
from fleetwave.core import status as st
from fleetwave.kube.status import Versioned


@dataclass(frozen=True, slots=True)
class Content:
    """What a rollout object carries: one snapshot's objects, under one inventory label, as each
    cluster gets them once its overrides are applied."""

    index: str
    hash: str
    objects: Sequence[Mapping[str, Any]]
    inventory: str
    rules: apply_rules.ApplyRules = apply_rules.DEFAULT
    overrides: ov.PerCluster = ov.NONE
    # The placement's creationTimestamp: a placement nobody delivered before needs no search for
    # what earlier deliveries left behind (ADR 0121).
    created: datetime | None = None

    def hash_for(self, cluster: str) -> str:
        """The hash of what `cluster` gets (the snapshot's when no override applies there)."""
        return self.overrides.digest(self.hash, cluster)

    def render(self, cluster: str) -> co.Rendered:
        """The objects `cluster` gets, envelopes unwrapped (ADR 0092); raises co.OverrideError."""
        return self.overrides.render(cluster, envelopes.unwrap(self.objects))


@dataclass(frozen=True, slots=True)
class Delivered:
    index: str
    hash: str
    applied_at: str
    message: str = ""
    error: str | None = None
    done_at: str | None = None
    diffs: tuple[Mapping[str, Any], ...] = ()  # ReportDiff: how the member differs
    # The override snapshots applied (upstream's names in status), or why they could not be.
    overrides: Mapping[str, Any] = field(default_factory=dict)
    override_error: str | None = None

    # `implied_hash`: the content hash of the snapshot a run delivers. A run's entry at it is written
    # without it (ADR 0137: the same 64 characters on every cluster, ~7 KB of a run's status at 100
    # clusters, sent to the API server on every status write); an entry at another content (a
    # rollback's target, a cluster's overrides) names its own. The index is always written: a
    # controller from before reads who holds which snapshot from it.
    @classmethod
    def load(cls, raw: Mapping[str, Any], implied_hash: str | None = None) -> Delivered:
        return cls(
            index=str(raw.get("index") or ""),
            hash=_own_or(raw.get("hash"), implied_hash or ""),
            applied_at=str(raw.get("appliedAt") or ""),
            message=str(raw.get("message") or ""),
            error=str(raw["error"]) if raw.get("error") else None,
            done_at=str(raw["doneAt"]) if raw.get("doneAt") else None,
            diffs=tuple(d for d in raw.get("diffedPlacements") or () if isinstance(d, Mapping)),
            overrides=dict(raw["overrides"]) if isinstance(raw.get("overrides"), Mapping) else {},
            override_error=str(raw["overrideError"]) if raw.get("overrideError") else None,
        )

    def dump(self, implied_hash: str | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {"index": self.index}
        if self.hash != implied_hash:
            out["hash"] = self.hash
        out["appliedAt"] = self.applied_at
        out["message"] = self.message
        if self.error:
            out["error"] = self.error
        if self.done_at:
            out["doneAt"] = self.done_at
        if self.diffs:
            out["diffedPlacements"] = [dict(d) for d in self.diffs]
        if self.overrides:
            out["overrides"] = dict(self.overrides)
        if self.override_error:
            out["overrideError"] = self.override_error
        return out


def _own_or(value: Any, implied: str) -> str:
    """An entry's own hash when it names one (an empty one included: it round-trips)."""
    return implied if value is None else str(value)


Ledger = Mapping[str, Delivered]


def load(raw: Mapping[str, Any] | None, implied_hash: str | None = None) -> Ledger:
    return {c: Delivered.load(e, implied_hash) for c, e in (raw or {}).items() if isinstance(e, Mapping)}


def dump(ledger: Ledger, implied_hash: str | None = None) -> dict[str, dict[str, Any]]:
    return {c: e.dump(implied_hash) for c, e in sorted(ledger.items())}


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
    memory: executor.DeliveryMemory,
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
        if entry is None or entry.hash != content.hash_for(cluster):
            continue  # pending: the engine asks for a Deliver again
        if entry.done_at:
            deliveries[cluster] = m.Delivery(m.DeliveryPhase.APPLIED, ready=True)
        else:
            check.append(cluster)
    settled = await asyncio.gather(
        *(_settle(ctx, memory, c, ledger[c], content, _per(wake, c)) for c in check)
    )
    deliveries.update((c, d) for c, (d, _) in zip(check, settled, strict=True))
    learnt = {c: e for c, (_, e) in zip(check, settled, strict=True)}
    return Observation(deliveries, merged(ledger, learnt))


def wake_of(ctx: Context, kind: str, current: Versioned) -> Wake | None:
    """The wake-up that re-runs the reconcile of the object `current` is the status of."""
    return ctx.wake(kind, f"{current.namespace}/{current.name}" if current.namespace else current.name)


def _per(wake: Wake | None, cluster: str) -> Wake | None:
    return None if wake is None else Wake((wake.key, cluster), wake.call)


async def _settle(
    ctx: Context,
    memory: executor.DeliveryMemory,
    cluster: str,
    entry: Delivered,
    content: Content,
    wake: Wake | None,
) -> tuple[m.Delivery, Delivered]:
    try:
        objects = content.render(cluster).objects
    except co.OverrideError as e:  # labels or pins changed since the apply: nothing more is applied
        failed = replace(entry, error=str(e), override_error=str(e))
        return m.Delivery(m.DeliveryPhase.FAILED, message=str(e)), failed
    if entry.error:  # a failed apply is retried, level-triggered, until it succeeds
        applied = await _apply(ctx, memory, cluster, objects, content)
        if not applied.ok:
            failed = replace(entry, error=applied.message)
            return m.Delivery(m.DeliveryPhase.FAILED, message=applied.message), failed
        entry = replace(entry, error=None, override_error=None, message=applied.message, diffs=applied.diffs)
    if content.rules.report_diff:  # nothing was applied: the report is the whole delivery
        entry = replace(entry, done_at=st.fmt(ctx.clock()))
        return m.Delivery(m.DeliveryPhase.APPLIED, ready=True, message=entry.message), entry
    result = await executor.available(
        ctx, memory, cluster, objects, wake=wake, inventory=content.inventory, rules=content.rules
    )
    if result.failed:  # a pull member's agent reported the apply failed: retried like any failure
        failed = replace(entry, error=result.message, message=result.message)
        return m.Delivery(m.DeliveryPhase.FAILED, message=result.message), failed
    done = st.fmt(ctx.clock()) if result.ok else None
    entry = replace(entry, message=result.message, done_at=done)
    return m.Delivery(m.DeliveryPhase.APPLIED, ready=result.ok, message=result.message), entry


async def _apply(
    ctx: Context,
    memory: executor.DeliveryMemory,
    cluster: str,
    objects: Sequence[Mapping[str, Any]],
    content: Content,
) -> executor.Outcome:
    """Apply `objects` (`content` as `cluster` gets it) under the content's inventory and rules."""
    return await executor.apply(
        ctx,
        memory,
        cluster,
        objects,
        inventory=content.inventory,
        rules=content.rules,
        created=content.created,
    )


async def deliver(
    ctx: Context, memory: executor.DeliveryMemory, clusters: Iterable[str], content: Content
) -> Ledger:
    """Apply `content` to `clusters`; the new ledger entries, failures included (retried later). A
    cluster whose overrides fail gets nothing applied: its entry says why."""
    todo = sorted(set(clusters))
    results = await asyncio.gather(*(_deliver_one(ctx, memory, c, content) for c in todo))
    return dict(zip(todo, results, strict=True))


async def _deliver_one(
    ctx: Context, memory: executor.DeliveryMemory, cluster: str, content: Content
) -> Delivered:
    digest = content.hash_for(cluster)
    try:
        rendered = content.render(cluster)
    except co.OverrideError as e:
        at = st.fmt(ctx.clock())
        return Delivered(content.index, digest, at, str(e), error=str(e), override_error=str(e))
    result = await _apply(ctx, memory, cluster, rendered.objects, content)
    at = st.fmt(ctx.clock())
    return Delivered(
        index=content.index,
        hash=digest,
        applied_at=at,
        message=result.message,
        error=None if result.ok else result.message,
        # ReportDiff applies nothing: once reported, there is nothing to wait for.
        done_at=at if result.ok and content.rules.report_diff else None,
        diffs=result.diffs,
        overrides=_applied(rendered),
    )


def _applied(rendered: co.Rendered) -> dict[str, Any]:
    if not rendered.cluster_overrides and not rendered.resource_overrides:
        return {}
    return {
        "clusterResourceOverrideSnapshots": list(rendered.cluster_overrides),
        "resourceOverrideSnapshots": [{"name": n, "namespace": ns} for ns, n in rendered.resource_overrides],
    }

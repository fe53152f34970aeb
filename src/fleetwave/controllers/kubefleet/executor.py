"""Carry a snapshot to one member cluster: server-side apply with an inventory label, prune what left
the snapshot, check availability of what was applied, and remove it all in the deletion stage.

Every call is idempotent, so a controller killed half-way simply does it again. An unreachable
member is reported as a message, never raised: the run waits and reports it.

What the applies leave to remember between passes (`DeliveryMemory`) belongs to the KubeFleet
controllers of one API family (`kubefleet.register` builds it and hands it to their reconciles).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, NamedTuple

from fleetwave.controllers.fleet import members, pull
from fleetwave.controllers.kubefleet import apply_rules, envelopes, executor_pull, selection
from fleetwave.controllers.shared.context import Context, Wake
from fleetwave.controllers.shared.first_deliveries import FirstDeliveries
from fleetwave.core import status as st
from fleetwave.delivery import manifests
from fleetwave.delivery.target import MemberTarget, MemberUnreachable
from fleetwave.kube import kinds

# Every built-in kind a snapshot may hold: what a prune or a removal must search for inventory labels.
KINDS = frozenset(kinds.GVK(k.api_version, k.name) for k in selection.KINDS.values())


def kinds_of(ctx: Context) -> frozenset[kinds.GVK]:
    """Every kind a prune or a removal searches: the built-in ones, those the controller is configured
    to place (ADR 0091), and whatever an envelope in a snapshot the cache holds wraps (ADR 0092: a
    kind that left the envelope is still found while its earlier snapshot is kept)."""
    return KINDS | {info.gvk for info in ctx.placement_kinds} | _wrapped(ctx)


def _wrapped(ctx: Context) -> frozenset[kinds.GVK]:
    out: set[kinds.GVK] = set()
    for snapshot_kind in ("ClusterResourceSnapshot", "ResourceSnapshot"):
        if snapshot_kind not in ctx.cache.informers:
            continue

        def build(kind: str = snapshot_kind) -> frozenset[kinds.GVK]:
            return frozenset(
                kinds.GVK(api_version, kind_name)
                for s in ctx.cache.list(kind)
                for api_version, kind_name in envelopes.wrapped_kinds(
                    (s.get("spec") or {}).get("selectedResources") or []
                )
            )

        out |= ctx.cache.memo(f"wrapped kinds of {snapshot_kind}", snapshot_kind, build)
    return frozenset(out)


Outcome = executor_pull.Outcome


def target(ctx: Context, cluster: str) -> MemberTarget | None:
    return members.target_for(ctx.cache, cluster)


def _missing(cluster: str) -> Outcome:
    return Outcome(False, f"cluster {cluster} is not registered or its kubeconfig Secret is missing")


class Placed(NamedTuple):
    """A placement's content on one cluster: its inventory is the same on every cluster, so what is
    remembered of an apply or a prune is remembered per cluster."""

    cluster: str
    inventory: str


# How long the objects an apply returned stand in for a read of them: the pass that applied them
# judges their availability next, a moment later (ADR 0068).
JUST_APPLIED_SECONDS = 1.0


class DeliveryMemory:
    """What the KubeFleet controllers of one API family remember of their own applies between passes,
    in memory only (a restart, or another replica, reads and lists again). One instance serves the
    placement and run controllers of both scopes: a placement's deletion removes what its runs
    applied, and must forget what they pruned.

    - When and what an apply returned, judged once by the availability check that follows it within
      JUST_APPLIED_SECONDS (`available`).
    - What each placement's content on each cluster was last pruned down to
      (`manifests.prune_unless_done`): the same delivery again has nothing left behind to look for.
      Forgotten when the content is removed, or when a shard is taken over (another replica may have
      delivered in the meantime).
    """

    def __init__(self, started: Callable[[], datetime | None] | None = None) -> None:
        """`started`: when the controllers began (`FirstDeliveries`)."""
        self._applied: dict[Placed, tuple[float, dict[manifests.ObjectId, Mapping[str, Any]]]] = {}
        self.prunes: manifests.PruneMemo[Placed] = {}
        self.firsts = FirstDeliveries[Placed](started=started or (lambda: None))

    def applied(self, at: Placed, live: Mapping[manifests.ObjectId, Mapping[str, Any]]) -> None:
        """An apply at `at` returned `live`; entries older than a moment are dropped on the way."""
        now = time.monotonic()
        for key in [k for k, (then, _) in self._applied.items() if now - then > JUST_APPLIED_SECONDS]:
            del self._applied[key]
        self._applied[at] = (now, dict(live))

    def just_applied(self, at: Placed) -> dict[manifests.ObjectId, Mapping[str, Any]] | None:
        """What the last apply at `at` returned, once, if that was a moment ago."""
        entry = self._applied.pop(at, None)
        if entry is None or time.monotonic() - entry[0] > JUST_APPLIED_SECONDS:
            return None
        return entry[1]

    def removed(self, at: Placed) -> None:
        """The content at `at` was removed (or its cluster left): a later delivery there prunes again."""
        self.prunes.pop(at, None)
        self.firsts.gone(at)

    def forget_prunes(self) -> None:
        """A shard was taken over: what was pruned no longer says nothing was left behind, and
        placements created until now may have been delivered by the replica that held it."""
        self.prunes.clear()
        self.firsts.taken_over()


async def apply(
    ctx: Context,
    memory: DeliveryMemory,
    cluster: str,
    objects: Sequence[Mapping[str, Any]],
    *,
    inventory: str,
    rules: apply_rules.ApplyRules = apply_rules.DEFAULT,
    created: datetime | None = None,
) -> Outcome:
    """`created`: the placement's creationTimestamp (ADR 0121)."""
    if pull.is_pull_member(ctx, cluster):
        return await executor_pull.apply(ctx, cluster, objects, inventory, rules, _kind_names(ctx))
    tgt = target(ctx, cluster)
    if tgt is None:
        return _missing(cluster)
    return await apply_to(
        ctx, memory, tgt, cluster, objects, inventory=inventory, rules=rules, created=created
    )


async def apply_to(
    ctx: Context,
    memory: DeliveryMemory,
    tgt: MemberTarget,
    cluster: str,
    objects: Sequence[Mapping[str, Any]],
    *,
    inventory: str,
    rules: apply_rules.ApplyRules = apply_rules.DEFAULT,
    kinds_: frozenset[kinds.GVK] | None = None,
    created: datetime | None = None,
) -> Outcome:
    """Apply to a member reached through `tgt` (the controller's, or a pull member's agent's own)."""
    at = Placed(cluster, inventory)
    try:
        if rules.report_diff:
            return _reported(await manifests.report_diff(tgt, objects, inventory=inventory), ctx)
        alone = memory.firsts.first_alone(at, created)
        report = await manifests.apply(
            tgt, objects, inventory=inventory, policy=rules.policy, known=ctx.known_versions
        )
        if not report.ok:
            return Outcome(False, "apply failed: " + "; ".join(report.errors))
        memory.applied(at, report.live)
        searched = kinds_ if kinds_ is not None else kinds_of(ctx)
        if alone:  # nobody delivered under this inventory here before: nothing was left behind
            manifests.nothing_left_behind(tgt, memory.prunes, at, kinds=searched, keep=report.refs)
        else:
            await manifests.prune_unless_done(
                tgt, memory.prunes, at, inventory=inventory, kinds=searched, keep=report.refs
            )
    except MemberUnreachable as e:
        return Outcome(False, str(e))
    return Outcome(True, "applied")


def _reported(diffs: list[manifests.ObjectDiff], ctx: Context) -> Outcome:
    """ReportDiff: nothing was applied; the differences in upstream's diffedPlacements shape."""
    at = st.fmt(ctx.clock())
    entries = tuple(_diffed(d, at) for d in diffs)
    if not diffs:
        return Outcome(True, "ReportDiff: no differences from the resource snapshot")
    shown = ", ".join(str(d.ref) for d in diffs[:5])
    return Outcome(
        True, f"ReportDiff: {len(diffs)} objects differ from the resource snapshot: {shown}", entries
    )


def _diffed(diff: manifests.ObjectDiff, at: str) -> dict[str, Any]:
    gvk = diff.ref.gvk
    entry: dict[str, Any] = {
        "group": gvk.group,
        "version": gvk.version,
        "kind": diff.ref.kind,
        "name": diff.ref.name,
        "observationTime": at,
    }
    if diff.ref.namespace:
        entry["namespace"] = diff.ref.namespace
    if diff.missing:
        entry["observedDiffs"] = [{"path": "/", "valueInHub": "(the whole object)"}]
    else:
        entry["observedDiffs"] = [
            {
                k: v
                for k, v in (
                    ("path", d.path),
                    ("valueInMember", _text(d.in_member)),
                    ("valueInHub", _text(d.in_hub)),
                )
                if v is not None
            }
            for d in diff.differences[:MAX_DIFFS]
        ]
    if diff.error:
        entry["error"] = diff.error
    return entry


MAX_DIFFS = 50  # per object: status stays small whatever the member holds


def _text(value: Any) -> str | None:
    """Upstream reports values as strings; None stays absent (the side does not have the field)."""
    if value is None:
        return None
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return text[:256]


async def available(
    ctx: Context,
    memory: DeliveryMemory,
    cluster: str,
    objects: Sequence[Mapping[str, Any]],
    *,
    wake: Wake | None = None,
    inventory: str | None = None,
    rules: apply_rules.ApplyRules = apply_rules.DEFAULT,
) -> Outcome:
    """Every applied object exists and is ready (Deployments available, Jobs complete, ...). With
    `inventory`, objects this process applied a moment ago are judged as the apply returned them.
    A pull member's agent judges it (`rules`: the strategy the objects were handed over with)."""
    if pull.is_pull_member(ctx, cluster):
        found = _kind_names(ctx)
        return await executor_pull.available(ctx, cluster, objects, inventory or "", rules, found, wake)
    tgt = target(ctx, cluster)
    if tgt is None:
        return _missing(cluster)
    return await available_at(ctx, memory, tgt, cluster, objects, wake=wake, inventory=inventory)


async def available_at(
    ctx: Context,
    memory: DeliveryMemory,
    tgt: MemberTarget,
    cluster: str,
    objects: Sequence[Mapping[str, Any]],
    *,
    wake: Wake | None = None,
    inventory: str | None = None,
) -> Outcome:
    """`available` on a member reached through `tgt`."""
    refs = [
        (
            str(o["apiVersion"]),
            str(o["kind"]),
            (o.get("metadata") or {}).get("namespace"),
            str(o["metadata"]["name"]),
        )
        for o in objects
    ]
    seen = memory.just_applied(Placed(cluster, inventory)) if inventory else None
    result = await ctx.health.check(tgt, [], objects=refs, wake=wake, seen=seen, delivered=seen is not None)
    return Outcome(result.ok, result.message)


async def remove(ctx: Context, memory: DeliveryMemory, cluster: str, *, inventory: str) -> Outcome:
    if pull.is_pull_member(ctx, cluster):
        return await executor_pull.remove(ctx, cluster, inventory, _kind_names(ctx))
    tgt = target(ctx, cluster)
    if tgt is None:
        # Upstream leaves content on a cluster that left the fleet; there is no way to reach it.
        memory.removed(Placed(cluster, inventory))  # should it come back, a delivery searches
        return Outcome(True, f"cluster {cluster} left the fleet; its content could not be removed")
    return await remove_from(memory, tgt, cluster, inventory=inventory, kinds_=kinds_of(ctx))


def _kind_names(ctx: Context) -> list[list[str]]:
    """The kinds a prune or removal searches, as [apiVersion, kind] pairs for a pull member's work."""
    return sorted([g.api_version, g.kind] for g in kinds_of(ctx))


async def remove_from(
    memory: DeliveryMemory, tgt: MemberTarget, cluster: str, *, inventory: str, kinds_: frozenset[kinds.GVK]
) -> Outcome:
    """`remove` from a member reached through `tgt`."""
    memory.removed(Placed(cluster, inventory))
    try:
        removed = await manifests.withdraw(tgt, inventory=inventory, kinds=kinds_)
    except MemberUnreachable as e:
        return Outcome(False, str(e))
    return Outcome(True, f"removed {len(removed)} objects")

"""ClusterProfile reconcile: a rolling update of one profile over its matching clusters.

Runs the shared rollout skeleton (`rollout_reconcile`): pin content -> engine step (pure) ->
effects: one ClusterSummary per admitted cluster, created or moved to the new revision; withdraw
clusters that no longer match -> one status write -> requeue when the engine says time or facts may
change the decision.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fleetwave.api.conditions import is_true
from fleetwave.api.models import ClusterProfile
from fleetwave.controllers.shared import engine_state
from fleetwave.controllers.shared.context import Context
from fleetwave.controllers.sveltos import (
    content,
    profile_scope,
    profile_withdrawal,
    rollout_reconcile,
    summary_writes,
)
from fleetwave.controllers.sveltos import rollout_common as common
from fleetwave.controllers.sveltos import rollout_facts as rf
from fleetwave.controllers.sveltos.rollout_reconcile import Observation, Pass, Prepared
from fleetwave.core import dependencies, rollback, selectors, timestamps
from fleetwave.core import effects as fx
from fleetwave.core import model as m
from fleetwave.kube import ops
from fleetwave.runtime.controller import Result

log = logging.getLogger(__name__)

KIND = "ClusterProfile"


@dataclass(frozen=True, slots=True)
class _Facts:
    existing: Mapping[str, Mapping[str, Any]]  # the profile's summaries by member key
    deliveries: Mapping[str, m.Delivery]
    matching: frozenset[str]  # members the profile's selector matches now
    of_promotion: bool  # a promotion's stage profile: its promotion shows the progress (ADR 0145)


def _matching(ctx: Context, run: Pass[ClusterProfile]) -> frozenset[str]:
    """The clusters the profile's selector matches, once per state of the fleet and selector: a
    pass matched every cluster of the fleet, and a promotion's stage profile passes at every batch.
    By the fleet as cached (a pass's own fleet differs only in which clusters are held back)."""
    selector, fleet = run.spec.stages[0].selector, common.fleet_of(ctx.cache)
    found = _MATCHING.get(run.key)
    if found is not None and found[0] is fleet and found[1] == selector:
        return found[2]
    if len(_MATCHING) >= 4096:
        _MATCHING.clear()
    matching = frozenset(c for c in fleet.names if selectors.matches(selector, fleet.by_name[c].labels))
    _MATCHING[run.key] = (fleet, selector, matching)
    return matching


_MATCHING: dict[str, tuple[m.Fleet, m.Selection | None, frozenset[str]]] = {}


class _Profiles:
    kind = KIND

    def prepare(self, ctx: Context, raw: Mapping[str, Any]) -> Prepared[ClusterProfile]:
        profile = common.parse_as(raw, KIND, ClusterProfile)
        resolved = _content(ctx, raw, profile)
        spec = common.profile_rollout(ctx.cache, profile, content_hash=resolved.hash)
        return Prepared(profile, resolved, spec, held=_held(ctx, profile))

    async def observe(self, ctx: Context, run: Pass[ClusterProfile]) -> Observation[_Facts]:
        existing = common.summaries_of(ctx.cache, run.key)
        names = run.fleet.names
        revision = run.spec.revision.content_hash
        deliveries = {c: rf.delivery_of(existing.get(c), run.resolved.hash, revision) for c in names}
        matching = _matching(ctx, run)
        observed = m.Observed(delivery=deliveries, previous=run.previous)
        of_promotion = common.owned_by_promotion(ctx, run.raw)
        return Observation(observed, _Facts(existing, deliveries, matching, of_promotion))

    async def act(
        self, ctx: Context, run: Pass[ClusterProfile], facts: _Facts, decision: fx.Decision
    ) -> None:
        for effect in decision.effects:
            if isinstance(effect, fx.Event):
                await common.emit(ctx, run.obj, effect)
        # Level-triggered: every admitted cluster has a summary at the current revision; nothing else does.
        # Admitted: started by the plan, or joined after it and started once its stage succeeded.
        admitted = {c for started in rollback.touched_by_stage(decision.status) for c in started}
        await summary_writes.apply_all(ctx, run.parsed, run.resolved, admitted & facts.matching)
        held = common.held_clusters(ctx, run.raw)
        for cluster, summary in facts.existing.items():
            if cluster not in facts.matching and cluster not in held:
                await delete_summary(ctx, summary)

    def status(self, run: Pass[ClusterProfile], facts: _Facts, decision: fx.Decision) -> dict[str, Any]:
        conditions = rf.conditions(decision.status, run.generation)
        if run.parsed.spec.depends_on:
            conditions.append(_dependencies_condition(run, facts))
        return {
            **rf.profile_status(
                decision.status,
                facts.matching,
                facts.deliveries,
                run.resolved.hash,
                run.family,
                progress_lists=not facts.of_promotion,
            ),
            "conditions": conditions,
            "rollout": engine_state.dump(decision.status),
        }

    def progress_only(self, previous: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
        return False  # what profiles that depend on it read: written at once

    async def after_status(self, ctx: Context, run: Pass[ClusterProfile], decision: fx.Decision) -> None:
        return None  # a profile's effects never edit its own spec


_PROFILES = _Profiles()
DEPENDENCIES = "DependenciesProvisioned"


def _held(ctx: Context, profile: ClusterProfile) -> dict[str, tuple[str, ...]]:
    """`dependsOn` (Sveltos): clusters where a profile this one depends on is not provisioned yet;
    a cycle is refused (the profile could never be delivered anywhere)."""
    needs = profile.spec.depends_on or []
    if not needs:
        return {}
    name = profile.metadata.name
    edges = {
        str(o["metadata"]["name"]): list((o.get("spec") or {}).get("dependsOn") or [])
        for o in ctx.cache.list(KIND)
    }
    edges[name] = list(needs)
    cycle = dependencies.cycle_through(name, edges)
    if cycle:
        raise content.ContentError(
            f"spec.dependsOn: {' -> '.join(cycle)} is a cycle; none of them can be delivered"
        )
    delivered = {d: common.summaries_of(ctx.cache, d) for d in set(needs)}

    def provisioned(dependency: str, cluster: str) -> bool:
        summary = delivered[dependency].get(cluster) or {}
        return is_true(summary.get("status"), "Ready")

    return dependencies.unmet(common.fleet_of(ctx.cache).names, needs, provisioned)


def _dependencies_condition(run: Pass[ClusterProfile], facts: _Facts) -> dict[str, Any]:
    waiting = {c: d for c, d in run.held.items() if c in facts.matching}
    if waiting:
        status, reason = "False", "WaitingForDependencies"
        why = dependencies.describe(waiting)
        message = f"not delivered until the profiles it depends on are provisioned: {why}"
    else:
        status, reason = "True", "Provisioned"
        message = "every profile it depends on is provisioned on its clusters"
    return {
        "type": DEPENDENCIES,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": timestamps.fmt(run.now),
        "observedGeneration": run.generation,
    }


async def reconcile(ctx: Context, withdrawals: profile_withdrawal.Withdrawals, key: str) -> Result:
    obj = ctx.cache.obj(KIND, None, key)
    if obj is not None:
        ended = await profile_withdrawal.guard(ctx, withdrawals, obj)
        if ended is not None:
            return ended
    return await rollout_reconcile.reconcile(ctx, key, _PROFILES)


def _content(ctx: Context, raw: Mapping[str, Any], profile: ClusterProfile) -> content.Resolved:
    """A promotion's stage profile delivers the snapshot its promotion pinned; others resolve live refs
    (within the content boundary, ADR 0046)."""
    annotations = raw["metadata"].get("annotations") or {}
    pinned = annotations.get(common.PINNED_ANNOTATION)
    if not pinned:
        # Only ever narrows what is read: a hand-made profile with the label confines itself.
        own = (raw["metadata"].get("labels") or {}).get(profile_scope.PROFILE_NAMESPACE_LABEL)
        return common.resolve(ctx, profile.spec, "spec", own_namespace=str(own) if own else None)
    where = f"metadata.annotations[{common.PINNED_ANNOTATION}]"
    if not common.owned_by_promotion(ctx, raw):
        raise content.ContentError(f"{where}: only a ClusterPromotion's stage profile may pin content")
    body = content.read_snapshot(ctx.cache, ctx.namespace, str(pinned))
    if body is None:
        raise content.ContentError(f"{where}: snapshot {pinned} not found")
    return content.Resolved(
        hash=str(annotations.get(common.PINNED_HASH_ANNOTATION)),
        body=body,
        from_secret=content.snapshot_kind(str(pinned)) == "Secret",
    )


async def delete_summary(ctx: Context, summary: Mapping[str, Any]) -> None:
    meta = summary["metadata"]
    if meta.get("deletionTimestamp"):
        return  # already on its way out (its finalizer withdraws the content)
    await ops.delete_if_exists(
        ctx.client, ctx.resource("ClusterSummary"), meta["name"], namespace=meta["namespace"]
    )

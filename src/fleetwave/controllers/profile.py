"""ClusterProfile reconcile: a rolling update of one profile over its matching clusters.

Runs the shared rollout skeleton (`rollout_reconcile`): pin content -> engine step (pure) ->
effects: one ClusterSummary per admitted cluster, created or moved to the new revision; withdraw
clusters that no longer match -> one status write -> requeue when the engine says time or facts may
change the decision.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fleetwave import translate
from fleetwave.api.models import ClusterProfile
from fleetwave.controllers import content, engine_state, profile_withdrawal, rollout_reconcile
from fleetwave.controllers import rollout_common as common
from fleetwave.controllers import rollout_facts as rf
from fleetwave.controllers import summary_status as ss
from fleetwave.controllers.context import Context
from fleetwave.controllers.echoes import tracked
from fleetwave.controllers.rollout_reconcile import Observation, Pass, Prepared
from fleetwave.core import dependencies, selectors, timestamps
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


class _Profiles:
    kind = KIND

    def prepare(self, ctx: Context, raw: Mapping[str, Any]) -> Prepared[ClusterProfile]:
        profile = common.parse_as(raw, KIND, ClusterProfile)
        resolved = _content(ctx, raw, profile)
        spec = translate.from_profile(profile, content_hash=resolved.hash)
        return Prepared(profile, resolved, spec, held=_held(ctx, profile))

    async def observe(self, ctx: Context, run: Pass[ClusterProfile]) -> Observation[_Facts]:
        existing = common.summaries_of(ctx.cache, run.key)
        names = run.fleet.names
        deliveries = {c: rf.delivery_of(existing.get(c), run.resolved.hash) for c in names}
        selector = run.spec.stages[0].selector
        matching = frozenset(c for c in names if selectors.matches(selector, run.fleet.by_name[c].labels))
        observed = m.Observed(delivery=deliveries, previous=run.previous)
        return Observation(observed, _Facts(existing, deliveries, matching))

    async def act(
        self, ctx: Context, run: Pass[ClusterProfile], facts: _Facts, decision: fx.Decision
    ) -> None:
        for effect in decision.effects:
            if isinstance(effect, fx.Event):
                await common.emit(ctx, run.obj, effect)
        # Level-triggered: every admitted cluster has a summary at the current revision; nothing else does.
        admitted = {c for s in decision.status.stages for c in s.started}
        # The spec every summary carries is dumped once, not once per cluster; the summaries that
        # must be written go concurrently (a batch of a large stage is dozens of them).
        dumped = summary_spec(run.parsed)
        gate = asyncio.Semaphore(SUMMARY_WRITES)

        async def one(cluster: str) -> None:
            async with gate:
                await apply_summary(ctx, run.obj, run.parsed, run.resolved, cluster, dumped)

        await asyncio.gather(*(one(c) for c in sorted(admitted & facts.matching)))
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
                decision.status, facts.matching, facts.deliveries, run.resolved.hash, run.family
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
        ready = [c for c in (summary.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"]
        return bool(ready) and ready[0].get("status") == "True"

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


async def reconcile(ctx: Context, key: str) -> Result:
    obj = ctx.cache.obj(KIND, None, key)
    if obj is not None:
        ended = await profile_withdrawal.guard(ctx, obj)
        if ended is not None:
            return ended
    return await rollout_reconcile.reconcile(ctx, key, _PROFILES)


def _content(ctx: Context, raw: Mapping[str, Any], profile: ClusterProfile) -> content.Resolved:
    """A promotion's stage profile delivers the snapshot its promotion pinned; others resolve live refs
    (within the content boundary, ADR 0046)."""
    annotations = raw["metadata"].get("annotations") or {}
    pinned = annotations.get(common.PINNED_ANNOTATION)
    if not pinned:
        return common.resolve(ctx, profile.spec, "spec")
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


def summary_spec(profile: ClusterProfile) -> dict[str, Any]:
    """The profile spec a summary carries: all of it but `clusterRefs`, which a promotion's stage
    profile grows batch by batch; copied, it rewrote every summary of the stage at every batch
    (quadratic in the stage's size), and no delivery reads it."""
    dumped = profile.spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    dumped.pop("clusterRefs", None)
    return dumped


SUMMARY_WRITES = 8  # summary writes of one profile in flight at once


async def apply_summary(
    ctx: Context,
    owner: Any,
    profile: ClusterProfile,
    resolved: content.Resolved,
    cluster: str,
    dumped_spec: dict[str, Any],
) -> None:
    """Server-side apply the cluster's ClusterSummary unless the cache shows it already as wanted."""
    summary = _summary_body(ctx, owner, profile, resolved, cluster, dumped_spec)
    meta = summary["metadata"]
    current = ctx.cache.get("ClusterSummary", meta["namespace"], meta["name"])
    if current is not None and _same(current, summary):
        return
    key = ("ClusterSummary", f"{meta['namespace']}/{meta['name']}")
    await tracked(ctx.echoes, key, KIND, ops.apply(ctx.client, summary), _version)


def _version(obj: Any) -> str | None:
    return getattr(obj.metadata, "resourceVersion", None)


def _summary_body(
    ctx: Context,
    owner: Any,
    profile: ClusterProfile,
    resolved: content.Resolved,
    cluster: str,
    dumped_spec: dict[str, Any],
) -> dict[str, Any]:
    namespace, _, name = cluster.partition("/")
    profile_name = profile.metadata.name
    leave = profile.spec.stop_matching_behavior == "LeavePolicies"
    metadata: dict[str, Any] = {
        "name": ss.summary_name(profile_name, name),
        "namespace": namespace,
        "labels": {
            ss.PROFILE_LABEL: profile_name,
            ss.SVELTOS_PROFILE_LABEL: profile_name,
            ss.CLUSTER_LABEL: name,
        },
        "annotations": {
            ss.CONTENT_ANNOTATION: resolved.snapshot_name,
            ss.CONTENT_HASH_ANNOTATION: resolved.hash,
            ss.LEAVE_POLICIES_ANNOTATION: "true" if leave else "false",
        },
        "ownerReferences": [common.owner_reference(ctx, KIND, owner)],
        # Created with the finalizer its controller would add first (a write and a pass more per
        # new summary, on the first delivery's path); it withdraws the content on deletion.
        "finalizers": [ss.FINALIZER],
    }
    spec = {
        "clusterNamespace": namespace,
        "clusterName": name,
        "clusterType": "Sveltos",
        "clusterProfileSpec": dumped_spec,
    }
    body = {
        "apiVersion": ctx.api_version("ClusterSummary"),
        "kind": "ClusterSummary",
        "metadata": metadata,
        "spec": spec,
    }
    written = hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()[:32]
    metadata["annotations"][ss.WRITTEN_HASH_ANNOTATION] = written
    return body


def _same(current: Mapping[str, Any], desired: Mapping[str, Any]) -> bool:
    """Whether the summary already holds what we would write: by the hash we wrote with it (a summary
    written before the hash existed is written once more, then compared by hash)."""
    return common.annotations_hold(current, desired["metadata"]["annotations"])


async def delete_summary(ctx: Context, summary: Mapping[str, Any]) -> None:
    meta = summary["metadata"]
    if meta.get("deletionTimestamp"):
        return  # already on its way out (its finalizer withdraws the content)
    await ops.delete_if_exists(
        ctx.client, ctx.resource("ClusterSummary"), meta["name"], namespace=meta["namespace"]
    )

"""ClusterProfile reconcile: a rolling update of one profile over its matching clusters.

Observe (cache) -> pin content -> engine step (pure) -> effects: one ClusterSummary per admitted
cluster, created or moved to the new revision; withdraw clusters that no longer match -> one status
write -> requeue when the engine says time or facts may change the decision.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from lightkube import ApiError, codecs

from fleetwave import translate
from fleetwave.api import codec
from fleetwave.api.models import ClusterProfile
from fleetwave.controllers import content, engine_state, members, requeue
from fleetwave.controllers import rollout_facts as rf
from fleetwave.controllers import summary_status as ss
from fleetwave.controllers.context import Context, as_dict
from fleetwave.core import effects as fx
from fleetwave.core import engine, selectors
from fleetwave.core import model as m
from fleetwave.kube import kinds
from fleetwave.kube.status import StatusWrite, write_status
from fleetwave.runtime.controller import Result

log = logging.getLogger(__name__)
_CONFLICT = 409
PINNED_ANNOTATION = "fleetwave.io/pinned-content"
PINNED_HASH_ANNOTATION = "fleetwave.io/pinned-content-hash"


def summaries_of(ctx: Context, profile: str) -> dict[str, dict[str, Any]]:
    """The profile's ClusterSummaries by member key."""
    out = {}
    for s in ctx.cache.list("ClusterSummary"):
        if ((s.get("metadata") or {}).get("labels") or {}).get(ss.PROFILE_LABEL) == profile:
            spec = s.get("spec") or {}
            out[members.member_key(spec["clusterNamespace"], spec["clusterName"])] = s
    return out


async def reconcile(ctx: Context, key: str) -> Result:
    obj = ctx.cache.obj("ClusterProfile", None, key)
    if obj is None or obj.metadata.deletionTimestamp:
        return Result()  # summaries are owned by the profile: garbage collection withdraws them
    raw = as_dict(obj)
    try:
        profile = codec.parse_object(
            {**raw, "apiVersion": f"{kinds.GROUP}/{kinds.VERSION}", "kind": "ClusterProfile"}
        )
        assert isinstance(profile, ClusterProfile)
        resolved = _content(ctx, raw, profile)
        spec = translate.from_profile(profile, content_hash=resolved.hash)
    except (codec.ManifestError, content.ContentError, translate.TranslateError) as e:
        return await report_invalid(ctx, obj, raw, str(e))
    await ensure_snapshot(ctx, resolved)
    fleet = members.fleet(members.from_object(o) for o in ctx.cache.list("MemberCluster"))
    existing = summaries_of(ctx, key)
    deliveries = {c: rf.delivery_of(existing.get(c), resolved.hash) for c in fleet.names}
    previous = engine_state.previous_of(raw)
    now = ctx.clock()
    decision = engine.step(spec, fleet, m.Observed(delivery=deliveries, previous=previous), now)
    matching = [c for c in fleet.names if selectors.matches(spec.stages[0].selector, fleet.by_name[c].labels)]
    await _act(ctx, obj, profile, resolved, decision, existing, set(matching))
    status = {
        **rf.profile_status(decision.status, matching, deliveries, resolved.hash),
        "conditions": rf.conditions(decision.status, raw["metadata"].get("generation")),
        "rollout": engine_state.dump(decision.status),
    }
    if await write_status(ctx.client, kinds.resource("ClusterProfile"), obj, status) is StatusWrite.CONFLICT:
        return Result(requeue=True)
    return requeue.after(decision, now)


def _content(ctx: Context, raw: Mapping[str, Any], profile: ClusterProfile) -> content.Resolved:
    """A promotion's stage profile delivers the snapshot its promotion pinned; others resolve live refs."""
    annotations = raw["metadata"].get("annotations") or {}
    pinned = annotations.get(PINNED_ANNOTATION)
    if pinned:
        snapshot = ctx.cache.get("ConfigMap", ctx.namespace, pinned)
        if snapshot is None:
            raise content.ContentError(
                f"metadata.annotations[{PINNED_ANNOTATION}]: snapshot {pinned} not found"
            )
        return content.Resolved(
            hash=str(annotations.get(PINNED_HASH_ANNOTATION)), body=content.load_snapshot(snapshot)
        )
    return content.resolve(profile.spec, ctx.cache, default_namespace=ctx.namespace, path="spec")


async def ensure_snapshot(ctx: Context, resolved: content.Resolved) -> None:
    if ctx.cache.get("ConfigMap", ctx.namespace, resolved.snapshot_name) is not None:
        return
    try:
        await ctx.client.create(codecs.from_dict(content.snapshot_configmap(resolved, ctx.namespace)))
    except ApiError as e:
        if e.status.code != _CONFLICT:  # 409: already there (another reconcile, or cache lag)
            raise


async def report_invalid(ctx: Context, obj: Any, raw: Mapping[str, Any], message: str) -> Result:
    now = ctx.clock()
    condition = {
        "type": "Ready",
        "status": "False",
        "reason": "InvalidSpec",
        "message": message,
        "lastTransitionTime": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "observedGeneration": raw["metadata"].get("generation"),
    }
    written = await write_status(
        ctx.client,
        kinds.resource(str(raw.get("kind") or "ClusterProfile")),
        obj,
        {**(raw.get("status") or {}), "conditions": [condition]},
    )
    if written is StatusWrite.WRITTEN:
        await ctx.event(obj, True, "InvalidSpec", message)
    return Result()  # nothing to retry: a spec or content edit wakes us


async def _act(
    ctx: Context,
    obj: Any,
    profile: ClusterProfile,
    resolved: content.Resolved,
    decision: fx.Decision,
    existing: Mapping[str, Mapping[str, Any]],
    matching: set[str],
) -> None:
    admitted = {c for s in decision.status.stages for c in s.started}
    for effect in decision.effects:
        if isinstance(effect, fx.Event):
            await ctx.event(
                obj,
                effect.reason in ("ClusterFailed", "ProgressDeadlineExceeded"),
                effect.reason,
                effect.message,
            )
    # Level-triggered: every admitted cluster has a summary at the current revision; nothing else does.
    for cluster in sorted(admitted & matching):
        await apply_summary(ctx, obj, profile, resolved, cluster)
    for cluster, summary in existing.items():
        if cluster not in matching:
            await delete_summary(ctx, summary)


async def apply_summary(
    ctx: Context, owner: Any, profile: ClusterProfile, resolved: content.Resolved, cluster: str
) -> None:
    namespace, _, name = cluster.partition("/")
    spec = profile.spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    leave = profile.spec.stop_matching_behavior == "LeavePolicies"
    summary: dict[str, Any] = {
        "apiVersion": f"{kinds.GROUP}/{kinds.VERSION}",
        "kind": "ClusterSummary",
        "metadata": {
            "name": ss.summary_name(profile.metadata.name, name),
            "namespace": namespace,
            "labels": {
                ss.PROFILE_LABEL: profile.metadata.name,
                ss.SVELTOS_PROFILE_LABEL: profile.metadata.name,
                ss.CLUSTER_LABEL: name,
            },
            "annotations": {
                ss.CONTENT_ANNOTATION: resolved.snapshot_name,
                ss.CONTENT_HASH_ANNOTATION: resolved.hash,
                ss.LEAVE_POLICIES_ANNOTATION: "true" if leave else "false",
            },
            "ownerReferences": [
                {
                    "apiVersion": f"{kinds.GROUP}/{kinds.VERSION}",
                    "kind": "ClusterProfile",
                    "name": owner.metadata.name,
                    "uid": owner.metadata.uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "clusterNamespace": namespace,
            "clusterName": name,
            "clusterType": "Sveltos",
            "clusterProfileSpec": spec,
        },
    }
    current = ctx.cache.get("ClusterSummary", namespace, ss.summary_name(profile.metadata.name, name))
    if current is not None and _same(current, summary):
        return
    await ctx.client.apply(codecs.from_dict(summary), force=True)


def _same(current: Mapping[str, Any], desired: Mapping[str, Any]) -> bool:
    cur_meta, want_meta = current.get("metadata") or {}, desired["metadata"]
    annotations = cur_meta.get("annotations") or {}
    return current.get("spec") == desired["spec"] and all(
        annotations.get(k) == v for k, v in want_meta["annotations"].items()
    )


async def delete_summary(ctx: Context, summary: Mapping[str, Any]) -> None:
    meta = summary["metadata"]
    if meta.get("deletionTimestamp"):
        return
    try:
        await ctx.client.delete(kinds.resource("ClusterSummary"), meta["name"], namespace=meta["namespace"])
    except ApiError as e:
        if e.status.code != 404:
            raise

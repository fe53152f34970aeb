"""The ClusterSummaries of a profile, as its controller writes them: one body per admitted cluster,
applied unless the cache already holds it. Shared by the profile's pass and, for a promotion's stage
profile, the promotion's pass that has just given it clusters (`write_ahead`)."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from fleetwave import translate
from fleetwave.api.models import ClusterProfile
from fleetwave.controllers import content
from fleetwave.controllers import rollout_common as common
from fleetwave.controllers import summary_status as ss
from fleetwave.controllers.context import Context, as_dict
from fleetwave.controllers.echoes import tracked
from fleetwave.core import selectors
from fleetwave.kube import ops

KIND = "ClusterProfile"  # the summaries' owner, and their writer as echoes know it (the profile's controller)


def summary_spec(profile: ClusterProfile) -> dict[str, Any]:
    """The profile spec a summary carries: all of it but `clusterRefs`, which a promotion's stage
    profile grows batch by batch; copied, it rewrote every summary of the stage at every batch
    (quadratic in the stage's size), and no delivery reads it."""
    dumped = profile.spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    dumped.pop("clusterRefs", None)
    return dumped


SUMMARY_WRITES = 8  # summary writes of one profile in flight at once


async def apply_all(
    ctx: Context, owner: Any, profile: ClusterProfile, resolved: content.Resolved, clusters: Iterable[str]
) -> None:
    """Every cluster's summary as `apply_summary` writes it. The spec every summary carries is
    dumped once, not once per cluster; the writes go concurrently (a batch of a large stage is
    dozens of them)."""
    dumped = summary_spec(profile)
    gate = asyncio.Semaphore(SUMMARY_WRITES)

    async def one(cluster: str) -> None:
        async with gate:
            await apply_summary(ctx, owner, profile, resolved, cluster, dumped)

    await asyncio.gather(*(one(c) for c in sorted(clusters)))


WRITE_AHEAD_MAX = SUMMARY_WRITES  # a stage's clusters a promotion's pass writes ahead: one round of writes


async def write_ahead(ctx: Context, owner: Any, resolved: content.Resolved, clusters: Iterable[str]) -> bool:
    """Write the summaries a promotion's stage profile has just been given clusters for, from the
    promotion's own pass: the profile's pass writes the same ones a watch event and a queue turn
    later, on the stage's critical path (ADR 0068, stop 32). Only what that pass is sure to write —
    a valid profile without dependsOn, clusters it selects and the engine may start — and the same
    body, so its own pass finds them written; and only while the stage has at most WRITE_AHEAD_MAX
    clusters (`clusters`: all it started, those written before are skipped by their cached hash): a
    large stage would hold the promotion's worker, and every promotion queued behind it, for many
    writes.
    `resolved`: the content the profile pins (its name and hash are all a summary carries). Whether
    it wrote them all: if not, the profile's pass is the one to."""
    raw = as_dict(owner)
    try:
        parsed = common.parse_as(raw, KIND, ClusterProfile)
        selector = translate.from_profile(parsed).stages[0].selector
    except common.INVALID:
        return False  # its own pass reports it, and writes nothing
    if parsed.spec.depends_on or raw["metadata"].get("deletionTimestamp"):
        return False
    fleet = common.fleet_of(ctx.cache)
    wanted = sorted(clusters)
    if len(wanted) > WRITE_AHEAD_MAX:
        return False
    chosen = [
        c
        for c in wanted
        if (cluster := fleet.by_name.get(c)) is not None
        and cluster.ready
        and selectors.matches(selector, cluster.labels)
    ]
    await apply_all(ctx, owner, parsed, resolved, chosen)
    return len(chosen) == len(wanted)


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

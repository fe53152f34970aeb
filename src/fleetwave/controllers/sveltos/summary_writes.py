"""The ClusterSummaries of a profile, as its controller writes them: one body per admitted cluster,
applied unless the cache already holds it. Shared by the profile's pass and, for a promotion's stage
profile, the promotion's pass that has just given it clusters (`write_ahead`)."""

from __future__ import annotations

import asyncio
import copy
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fleetwave.api.models import ClusterProfile
from fleetwave.controllers.fleet import tenancy
from fleetwave.controllers.shared.context import Context, as_dict
from fleetwave.controllers.shared.echoes import tracked
from fleetwave.controllers.sveltos import content, profile_scope
from fleetwave.controllers.sveltos import rollout_common as common
from fleetwave.controllers.sveltos import summary_status as ss
from fleetwave.core import selectors
from fleetwave.kube import ops
from fleetwave.translate.common import split_key

KIND = "ClusterProfile"  # the summaries' owner, and their writer as echoes know it (the profile's controller)


def summary_spec(profile: ClusterProfile) -> dict[str, Any]:
    """The profile spec a summary carries: all of it but `clusterRefs`, which a promotion's stage
    profile grows batch by batch; copied, it rewrote every summary of the stage at every batch
    (quadratic in the stage's size), and no delivery reads it. Fields at their defaults are left
    out: the CRD's defaults put them back in the stored object, and left out they are not listed
    in the summary's managedFields, which the API server holds in every version it keeps (ADR 0118)."""
    dumped = profile.spec.model_dump(mode="json", by_alias=True, exclude_none=True, exclude_defaults=True)
    dumped.pop("clusterRefs", None)
    return dumped


SUMMARY_WRITES = 8  # summary writes of one profile in flight at once


async def apply_all(
    ctx: Context, profile: ClusterProfile, resolved: content.Resolved, clusters: Iterable[str]
) -> None:
    """Every cluster's summary unless the cache already holds it as wanted. What all summaries share
    is built and hashed once per pass, and only the summaries to write get a body and a task (a
    pass checks every admitted cluster, and built, hashed and scheduled each); the writes go
    concurrently (a batch of a large stage is dozens of them)."""
    shared = Shared.of(ctx, profile, resolved)
    due = [c for c in sorted(clusters) if not _held(ctx, shared, c)]
    gate = asyncio.Semaphore(SUMMARY_WRITES)

    async def one(cluster: str) -> None:
        async with gate:
            body = shared.body(cluster)
            meta = body["metadata"]
            key = ("ClusterSummary", f"{meta['namespace']}/{meta['name']}")
            await tracked(ctx.echoes, key, KIND, ops.apply(ctx.client, body), _version)

    await asyncio.gather(*(one(c) for c in due))


WRITE_AHEAD_MAX = SUMMARY_WRITES  # a stage's clusters a promotion's pass writes ahead: one round of writes


async def write_ahead(ctx: Context, owner: Any, resolved: content.Resolved, clusters: Iterable[str]) -> bool:
    """Write the summaries a promotion's stage profile has just been given clusters for, from the
    promotion's own pass: the profile's pass writes the same ones a watch event and a queue turn
    later, on the stage's critical path (ADR 0068, addendum 58d1d17). Only what that pass is sure to write —
    a valid profile without dependsOn, clusters it selects and the engine may start — and the same
    body, so its own pass finds them written; and only while the stage has at most WRITE_AHEAD_MAX
    clusters (`clusters`: all it started, those written before are skipped by their cached hash): a
    large stage would hold the promotion's worker, and every promotion queued behind it, for many
    writes.
    `owner`: the profile as stored, or as it will be once a write in flight is stored (its uid
    known). `resolved`: the content the profile pins (its name and hash are all a summary carries).
    Whether it wrote them all: if not, the profile's pass is the one to."""
    wanted = sorted(clusters)
    if len(wanted) > WRITE_AHEAD_MAX:
        return False  # before parsing: a large stage's profile lists hundreds of clusters
    raw = as_dict(owner)
    try:
        parsed = common.parse_as(raw, KIND, ClusterProfile)
        selector = common.profile_rollout(ctx.cache, parsed).stages[0].selector
    except common.INVALID:
        return False  # its own pass reports it, and writes nothing
    if parsed.spec.depends_on or raw["metadata"].get("deletionTimestamp"):
        return False
    fleet = common.fleet_of(ctx.cache)
    chosen = [
        c
        for c in wanted
        if (cluster := fleet.by_name.get(c)) is not None
        and cluster.ready
        and selectors.matches(selector, cluster.labels)
    ]
    await apply_all(ctx, parsed, resolved, chosen)
    return len(chosen) == len(wanted)


def _version(obj: Any) -> str | None:
    return getattr(obj.metadata, "resourceVersion", None)


_LAYOUT = "4"  # part of every written hash: a change of the body's layout rewrites every summary


@dataclass(frozen=True, slots=True)
class Shared:
    """What every summary of one profile pass carries; a cluster adds its name and namespace."""

    profile: str
    api_version: str
    annotations: Mapping[str, str]
    owner_reference: Mapping[str, Any]
    profile_spec: Mapping[str, Any]
    digest: str  # of all of the above
    # Sveltos' `projectsveltos.io/profile-name` on the summaries of a Profile's generated profile, and
    # the profile's tenant-admin labels (ADR 0111): the summary delivers as that ServiceAccount.
    labels: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, ctx: Context, profile: ClusterProfile, resolved: content.Resolved) -> Shared:
        return cls.build(
            profile=profile,
            api_version=ctx.api_version("ClusterSummary"),
            owner_reference=common.owner_reference(ctx, KIND, profile),
            snapshot=resolved.snapshot_name,
            content_hash=resolved.hash,
        )

    @classmethod
    def build(
        cls,
        *,
        profile: ClusterProfile,
        api_version: str,
        owner_reference: Mapping[str, Any],
        snapshot: str,
        content_hash: str,
    ) -> Shared:
        """From its parts (the benchmarks build summaries as the controller does, with no context)."""
        leave = profile.spec.stop_matching_behavior == "LeavePolicies"
        fields: dict[str, Any] = {
            "profile": profile.metadata.name,
            "api_version": api_version,
            # leave-policies only when it is true: absent reads as false (ADR 0118)
            "annotations": {
                ss.CONTENT_ANNOTATION: snapshot,
                ss.CONTENT_HASH_ANNOTATION: content_hash,
                **({ss.LEAVE_POLICIES_ANNOTATION: "true"} if leave else {}),
            },
            "owner_reference": owner_reference,
            "profile_spec": summary_spec(profile),
        }
        labels = {**_profile_labels(profile), **tenancy.tenant_labels(profile.metadata.labels)}
        # Only when there are any: the hash of every other profile's summaries stays as it was.
        hashed = {**fields, **({"labels": labels} if labels else {}), "layout": _LAYOUT}
        text = json.dumps(hashed, sort_keys=True, default=str)
        return cls(**fields, digest=hashlib.sha256(text.encode()).hexdigest(), labels=labels)

    def annotations_of(self, cluster: str) -> dict[str, str]:
        written = hashlib.sha256(f"{self.digest}/{cluster}".encode()).hexdigest()[:32]
        return {**self.annotations, ss.WRITTEN_HASH_ANNOTATION: written}

    def body(self, cluster: str) -> dict[str, Any]:
        _, namespace, name = split_key(cluster)
        cluster_type = ss.cluster_type(cluster)
        return {
            "apiVersion": self.api_version,
            "kind": "ClusterSummary",
            "metadata": {
                "name": ss.summary_name(self.profile, name, cluster_type),
                "namespace": namespace,
                "labels": {
                    ss.PROFILE_LABEL: self.profile,
                    ss.SVELTOS_PROFILE_LABEL: self.profile,
                    ss.CLUSTER_LABEL: name,
                    **self.labels,
                    ss.SVELTOS_CLUSTER_NAME_LABEL: name,
                    ss.SVELTOS_CLUSTER_TYPE_LABEL: cluster_type,
                },
                "annotations": self.annotations_of(cluster),
                "ownerReferences": [dict(self.owner_reference)],
                # Created with the finalizer its controller would add first (a write and a pass
                # more per new summary, on the first delivery's path); it withdraws the content on
                # deletion.
                "finalizers": [ss.FINALIZER],
            },
            "spec": {
                "clusterNamespace": namespace,
                "clusterName": name,
                "clusterType": cluster_type,
                "clusterProfileSpec": copy.deepcopy(dict(self.profile_spec)),
            },
        }


def _profile_labels(profile: ClusterProfile) -> dict[str, str]:
    """The Profile a generated profile delivers, as Sveltos labels its summaries (ADR 0110); none
    for any other profile, or when the name cannot be a label value."""
    meta = profile.metadata.model_dump(by_alias=True, exclude_none=True)
    owner = profile_scope.owner_of({"metadata": meta})
    if owner is None or len(owner[1]) > profile_scope.MAX_NAME:
        return {}
    return {profile_scope.SVELTOS_PROFILE_NAME_LABEL: owner[1]}


def _held(ctx: Context, shared: Shared, cluster: str) -> bool:
    """Whether the cache shows the cluster's summary as `shared` would write it: by the hash written
    with it (a summary written before that hash existed, or with another, is written once more)."""
    _, namespace, name = split_key(cluster)
    current = ctx.cache.get(
        "ClusterSummary", namespace, ss.summary_name(shared.profile, name, ss.cluster_type(cluster))
    )
    return current is not None and common.annotations_hold(current, shared.annotations_of(cluster))

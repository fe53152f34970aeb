"""Helpers the Sveltos-style rollout controllers share (ClusterPromotion, ClusterProfile).

Neutral ground: the promotion and profile controllers both use these, and neither imports the
other. Everything that touches Kubernetes goes through `fleetwave.kube`; reads come from the cache.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import json
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from fleetwave import translate
from fleetwave.api import codec
from fleetwave.api.sveltos import ClusterProfile, KustomizationRef, PolicyRef, ProfileSpec
from fleetwave.controllers.fleet import members
from fleetwave.controllers.fleet.boundary import content_boundary
from fleetwave.controllers.shared.context import Cache, Context
from fleetwave.controllers.shared.versioned_memo import PER_SUMMARY, VersionedMemo
from fleetwave.controllers.sveltos import content
from fleetwave.controllers.sveltos import summary_status as ss
from fleetwave.core import effects as fx
from fleetwave.core import model as m
from fleetwave.core import timestamps
from fleetwave.delivery import content as dc
from fleetwave.delivery.artifact_store import normal_path
from fleetwave.delivery.artifacts import FLUX_KINDS, Broken, artifact_of
from fleetwave.kube import kinds, ops
from fleetwave.kube.status import StatusWrite, Versioned
from fleetwave.runtime.controller import Result

NATIVE_API_VERSION = f"{kinds.GROUP}/{kinds.VERSION}"
# A stage profile delivers the snapshot its promotion pinned, named (and hashed) in these annotations.
PINNED_ANNOTATION = "fleetwave.io/pinned-content"
PINNED_HASH_ANNOTATION = "fleetwave.io/pinned-content-hash"
# The clusters of a stage whose summaries a stage profile keeps at whatever revision they hold while
# they are not (yet) admitted at the pinned one: a new revision or a rollback reaches them batch by
# batch, never by withdrawing what they run first (ADR 0078).
HOLD_ANNOTATION = "fleetwave.io/hold-clusters"
# What makes a spec invalid (reported in status, not retried: an edit wakes the controller).
INVALID = (codec.ManifestError, content.ContentError, translate.TranslateError)

T = TypeVar("T")


_PARSED: OrderedDict[tuple[str, str], Any] = OrderedDict()
_PARSED_SIZE = 4096
_UNPARSED_METADATA = ("resourceVersion", "managedFields")


def parse_as(raw: Mapping[str, Any], kind: str, model: type[T]) -> T:
    """The cached object as its API model; the cache may hold it under another apiVersion spelling.

    The model carries no status (controllers read status from the raw object) and is parsed once per
    content of everything else: a rollout's status write, at every pass, changed the resourceVersion
    and made the next pass parse (and deep-copy) a status of thousands of clusters again. A reconcile
    re-reads an unchanged object all the time, and a summary reads its profile's spec on every pass;
    models are never modified after parsing. One version of an object is one content: it is parsed
    (even hashed) once, and a summary reading its profile at every pass finds it by version."""
    parsed = _BY_VERSION.get(raw, kind, lambda o: _parse(o, kind, model))
    assert isinstance(parsed, model)
    return parsed


_BY_VERSION: VersionedMemo[Any] = VersionedMemo(PER_SUMMARY)  # the models themselves are _PARSED's


# Per object (kind, uid): the body it was last parsed from, and that body's content key. A status
# write makes a new version whose body is equal to the last: comparing the two (in C) finds its
# content without serialising and hashing the body again, which under 100 rollouts over 100 clusters
# was the largest share of fleetwave's own code in the controller's loop stalls (benchmarks.md,
# 2026-11-30). Equality, not the generation alone: a body written ahead carries the live generation.
# Equality alone would not do either (Python holds 1 == True == 1.0, JSON does not), but the body
# keeps metadata.generation, which the API server moves when any of that changes.
_LAST_BODY: OrderedDict[tuple[str, str], tuple[dict[str, Any], tuple[str, str]]] = OrderedDict()


def _content_key(body: dict[str, Any], kind: str) -> tuple[str, str]:
    meta = body["metadata"]
    ident = (kind, str(meta.get("uid") or f"{meta.get('namespace')}/{meta.get('name')}"))
    last = _LAST_BODY.get(ident)
    if last is not None and last[0] == body:
        _LAST_BODY.move_to_end(ident)
        return last[1]
    text = json.dumps(body, sort_keys=True, default=str)
    key = (kind, hashlib.blake2b(text.encode(), digest_size=16).hexdigest())
    _LAST_BODY[ident] = (body, key)
    _LAST_BODY.move_to_end(ident)
    if len(_LAST_BODY) > _PARSED_SIZE:
        _LAST_BODY.popitem(last=False)
    return key


def _parse(raw: Mapping[str, Any], kind: str, model: type[T]) -> T:
    meta = raw.get("metadata") or {}
    body = {k: v for k, v in raw.items() if k not in ("status", "apiVersion", "kind")}
    body["metadata"] = {k: v for k, v in meta.items() if k not in _UNPARSED_METADATA}
    key = _content_key(body, kind)
    parsed = _PARSED.get(key)
    if parsed is None:
        parsed = codec.parse_object({**body, "apiVersion": NATIVE_API_VERSION, "kind": kind})
        _PARSED[key] = parsed
        if len(_PARSED) > _PARSED_SIZE:
            _PARSED.popitem(last=False)
    else:
        _PARSED.move_to_end(key)
    assert isinstance(parsed, model)
    return parsed


def fleet_of(cache: Cache) -> m.Fleet:
    """The fleet as rollouts see it: the family's registered members, and in Sveltos' its Cluster API
    clusters (ADR 0109); rebuilt only when one of them changed."""
    kinds_read = ("MemberCluster", members.CAPI_CACHE_KIND) if members.with_capi(cache) else "MemberCluster"
    return cache.memo(
        "fleet",
        kinds_read,
        lambda: members.fleet(members.of_family(cache), cache.family.served("MemberCluster").kind),
    )


def set_clusters(cache: Cache, names: Iterable[str]) -> frozenset[str]:
    """The member keys the named ClusterSets have chosen now (ADR 0108), from the cache."""
    wanted = sorted(set(names))
    if not wanted or "ClusterSet" not in cache.informers:
        return frozenset()
    return translate.clusters_of_sets(wanted, {n: cache.get("ClusterSet", None, n) for n in wanted})


def profile_rollout(
    cache: Cache, profile: ClusterProfile, *, content_hash: str | None = None
) -> m.RolloutSpec:
    """The engine's view of a ClusterProfile, its setRefs resolved to what the sets chose: the one
    translation the profile's pass, its summaries and a promotion's write-ahead all judge by."""
    chosen = set_clusters(cache, profile.spec.set_refs or ())
    return translate.from_profile(profile, content_hash=content_hash, set_clusters=chosen)


def summaries_of(cache: Cache, profile: str) -> dict[str, dict[str, Any]]:
    """The profile's ClusterSummaries by member key: only those it made (its controller reference,
    the name and namespace fleetwave gives), so a hand-made summary never counts as a delivery."""
    owner = cache.get("ClusterProfile", None, profile)
    uid = ((owner or {}).get("metadata") or {}).get("uid")
    out: dict[str, dict[str, Any]] = {}
    if uid is None:
        return out
    api_version = cache.family.api_version("ClusterProfile")
    for s in cache.labelled("ClusterSummary", ss.PROFILE_LABEL, profile):
        key = _OWN_SUMMARIES.get(
            s, (profile, uid, api_version), lambda o: _own_key(o, profile, uid, api_version)
        )
        if key is not None:
            out[key] = s
    return out


_OWN_SUMMARIES: VersionedMemo[str | None] = VersionedMemo(PER_SUMMARY)


def _own_key(summary: Mapping[str, Any], profile: str, uid: Any, api_version: str) -> str | None:
    """The member key of a summary the profile made (None: not one of its own)."""
    if ss.foreign(summary, profile, uid, api_version):
        return None
    return ss.cluster_of(summary.get("spec") or {})


def owned_by_promotion(ctx: Context, raw: Mapping[str, Any]) -> bool:
    """Whether a ClusterProfile is a stage profile of a live ClusterPromotion (its controller
    reference, uid checked): only those may deliver a pinned snapshot instead of their own refs."""
    for ref in (raw.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller") and ref.get("kind") == "ClusterPromotion":
            owner = ctx.cache.get("ClusterPromotion", None, str(ref.get("name")))
            uid = ((owner or {}).get("metadata") or {}).get("uid")
            same_group = ref.get("apiVersion") == ctx.api_version("ClusterPromotion")
            return same_group and uid is not None and ref.get("uid") == uid
    return False


def held_clusters(ctx: Context, raw: Mapping[str, Any]) -> frozenset[str]:
    """The clusters a promotion's stage profile holds (HOLD_ANNOTATION); none for any other profile."""
    value = ((raw.get("metadata") or {}).get("annotations") or {}).get(HOLD_ANNOTATION)
    if not value or not owned_by_promotion(ctx, raw):
        return frozenset()
    return frozenset(c for c in str(value).split(",") if c)


def owner_reference(ctx: Context, kind: str, owner: Any) -> dict[str, Any]:
    """The controller reference that lets garbage collection take what a rollout generated."""
    return {
        "apiVersion": ctx.api_version(kind),
        "kind": kind,
        "name": owner.metadata.name,
        "uid": owner.metadata.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def annotations_hold(current: Mapping[str, Any], wanted: Mapping[str, str]) -> bool:
    """Whether `current` already carries every wanted annotation (others may be added by anyone)."""
    present = (current.get("metadata") or {}).get("annotations") or {}
    return all(present.get(k) == v for k, v in wanted.items())


async def emit(ctx: Context, obj: Any, event: fx.Event) -> None:
    await ctx.event(obj, event.warning, event.reason, event.message)


async def parse_ahead(ctx: Context, kind: str, raw: Mapping[str, Any]) -> None:
    """Parse the large content the rollout's `resolve` is about to read, in a worker thread, so the
    event loop (leases, probes, every other reconcile) never runs a parse of it. Reads the spec's
    policyRefs as written; a spec that does not parse is left to `prepare` to report."""
    spec = _content_spec(kind, raw, ("policyRefs", "helmCharts"))
    if spec is None:
        return
    path = "spec.profileSpec" if kind == "ClusterPromotion" else "spec"
    texts = content.large_texts(
        spec, ctx.cache, default_namespace=ctx.namespace, path=path, boundary=content_boundary(ctx)
    )
    pending = dc.unparsed(texts) if texts else []
    if pending:
        await asyncio.to_thread(dc.parse_ahead, pending)


def resolve(ctx: Context, spec: Any, path: str, *, own_namespace: str | None = None) -> content.Resolved:
    """Resolve a cluster-scoped profile's content within its boundary (ADR 0046); a Profile's
    generated profile reads only its `own_namespace` (ADR 0110)."""
    boundary = content_boundary(ctx)
    if own_namespace is not None:
        boundary = dataclasses.replace(boundary, own_namespace=own_namespace)
    return content.resolve(
        spec,
        ctx.cache,
        default_namespace=ctx.namespace,
        path=path,
        boundary=boundary,
        artifacts=ctx.artifacts,
    )


async def fetch_ahead(ctx: Context, kind: str, raw: Mapping[str, Any]) -> None:
    """Fetch the Flux artifacts the rollout's `resolve` is about to read (ADR 0103), so that it finds
    them: downloads, digest checks, unpacking and reading happen here, off the event loop. A
    reference `resolve` would refuse is skipped (it says why); so is a source without an artifact."""
    if ctx.artifacts is None:
        return
    spec = _content_spec(kind, raw, ("policyRefs", "kustomizationRefs"))
    if spec is None:
        return
    boundary = content_boundary(ctx)
    wanted: dict[tuple[str, str, str], set[str]] = {}
    refs: list[PolicyRef | KustomizationRef] = [*(spec.policy_refs or []), *(spec.kustomization_refs or [])]
    for ref in refs:
        kind_of = ref.kind or "ConfigMap"
        if kind_of not in FLUX_KINDS or not ref.name:
            continue
        namespace = ref.namespace or boundary.own_namespace or ctx.namespace
        if boundary.namespace_problem(namespace):
            continue
        paths = wanted.setdefault((str(kind_of), namespace, ref.name), set())
        with contextlib.suppress(Broken):  # a path leaving the root: `resolve` reports it
            paths.add(normal_path(ref.path) if isinstance(ref, PolicyRef) else ".")
    for (source_kind, namespace, name), paths in wanted.items():
        source = ctx.cache.get(source_kind, namespace, name)
        try:
            artifact = artifact_of(source_kind, source) if source is not None else None
        except Broken:
            continue
        if artifact is not None:
            await ctx.artifacts.ensure(artifact, paths)


def _content_spec(kind: str, raw: Mapping[str, Any], fields: tuple[str, ...]) -> ProfileSpec | None:
    """The `fields` of the profile spec a rollout resolves, as written (None: none of them, a stage
    profile, which delivers its promotion's snapshot, or a spec that does not parse: `prepare`
    reports that)."""
    spec_raw = raw.get("spec") or {}
    if kind == "ClusterPromotion":
        spec_raw = spec_raw.get("profileSpec") or {}
    elif (raw.get("metadata") or {}).get("annotations", {}).get(PINNED_ANNOTATION):
        return None
    if not isinstance(spec_raw, Mapping):
        return None
    wanted = {k: spec_raw[k] for k in fields if isinstance(spec_raw.get(k), list)}
    try:
        return ProfileSpec.model_validate(wanted) if wanted else None
    except ValueError:
        return None


def _not_ready(ctx: Context, raw: Mapping[str, Any], reason: str, message: str) -> dict[str, Any]:
    """The object's status with one condition, Ready=False for `reason`, in place of the others."""
    condition = {
        "type": "Ready",
        "status": "False",
        "reason": reason,
        "message": message,
        "lastTransitionTime": timestamps.fmt(ctx.clock()),
        "observedGeneration": raw["metadata"].get("generation"),
    }
    return {**(raw.get("status") or {}), "conditions": [condition]}


PENDING_REASON = "ContentPending"
PENDING_RETRY = 5.0


async def report_pending(ctx: Context, obj: Any, raw: Mapping[str, Any], kind: str, message: str) -> Result:
    """Say in status that a Flux artifact is not fetched yet (no new revision is made until it is),
    and try again shortly."""
    status = _not_ready(ctx, raw, PENDING_REASON, message)
    await ctx.write_status(kind, Versioned.of(obj), status)
    return Result(requeue_after=PENDING_RETRY)


async def ensure_snapshot(ctx: Context, resolved: content.Resolved) -> None:
    """The immutable, content-addressed snapshot of `resolved` exists (created on first use): a
    ConfigMap, or a Secret when any of the content was read from a Secret."""
    if ctx.cache.get(resolved.snapshot_kind, ctx.namespace, resolved.snapshot_name) is not None:
        return
    anchor_uid = None
    if resolved.from_secret:  # owned by an anchor ConfigMap, so that it can be collected (ADR 0084)
        anchor = content.snapshot_anchor(resolved, ctx.namespace)
        await ops.create_if_absent(ctx.client, anchor)
        config_maps = kinds.builtin_resource("v1", "ConfigMap")
        found = await ops.get(ctx.client, config_maps, resolved.snapshot_name, namespace=ctx.namespace)
        anchor_uid = str(found.metadata.uid) if found is not None else None
    # Already there is fine: another reconcile made it, or the cache lags behind.
    await ops.create_if_absent(
        ctx.client, content.snapshot_object(resolved, ctx.namespace, anchor_uid=anchor_uid)
    )


INVALID_REASON = "InvalidSpec"


async def report_invalid(ctx: Context, obj: Any, raw: Mapping[str, Any], kind: str, message: str) -> Result:
    """Say in status (and once in an event) why the spec cannot be rolled out."""
    status = _not_ready(ctx, raw, INVALID_REASON, message)
    written, _ = await ctx.write_status(kind, Versioned.of(obj), status)
    if written is StatusWrite.WRITTEN:
        await ctx.event(obj, True, "InvalidSpec", message)
    return Result()  # nothing to retry: a spec or content edit wakes us

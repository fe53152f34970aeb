"""Profile reconcile: a namespaced Profile delivered through its generated ClusterProfile (ADR 0110).

Each Profile is compiled (`profile_scope`, pure) into one cluster-scoped ClusterProfile,
`p--<namespace>.<name>`, that the ClusterProfile and ClusterSummary controllers deliver like any
other: one delivery path. The Profile's status mirrors that profile's (matching clusters, updates,
conditions) and names its ClusterSummaries. A Profile that would leave its namespace is refused in
its status and nothing is generated for it (nor read).

A cluster-scoped object cannot have a namespaced owner (the garbage collector would delete it at
once), so the generated profile carries labels naming its Profile instead, and the Profile a
finalizer: when it is deleted, the generated profile is deleted, its own withdrawal runs (ADR 0090),
and the finalizer goes once the profile and its summaries are gone.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from fleetwave.api import sveltos
from fleetwave.controllers.fleet import tenancy
from fleetwave.controllers.shared.context import Context, as_dict
from fleetwave.controllers.sveltos import profile_scope, rollout_common
from fleetwave.controllers.sveltos import summary_status as ss
from fleetwave.core import timestamps
from fleetwave.kube import ops
from fleetwave.kube.status import StatusWrite, Versioned
from fleetwave.runtime.controller import Result
from fleetwave.translate import sets

KIND = "Profile"
FINALIZER = "fleetwave.io/withdraw-generated-profile"
RECHECK = 2.0  # seconds; the generated profile's events wake the Profile too, this is the safety net
# What of the generated profile's status the Profile shows as its own.
MIRRORED = ("matchingClusters", "updatingClusters", "updatedClusters", "failedClusters")


async def reconcile(ctx: Context, key: str) -> Result:
    namespace, _, name = key.partition("/")
    obj = ctx.cache.obj(KIND, namespace, name)
    if obj is None:
        await _delete_orphan(ctx, namespace, name)
        return Result()
    raw = ctx.family.view(KIND, as_dict(obj))
    meta = raw.get("metadata") or {}
    finalizers = list(meta.get("finalizers") or [])
    if meta.get("deletionTimestamp"):
        return await _withdraw(ctx, obj, raw, finalizers)
    if FINALIZER not in finalizers:
        await _set_finalizers(ctx, meta, [*finalizers, FINALIZER])
        return Result()  # the edit's own event brings us back
    try:
        wanted = _generate(raw, _tenants(ctx, namespace), set_clusters(ctx, namespace, raw))
    except profile_scope.Refused as e:
        return await rollout_common.report_invalid(ctx, obj, raw, KIND, str(e))
    current = ctx.cache.get("ClusterProfile", None, wanted.name)
    if current is not None and profile_scope.owner_of(current) != (namespace, name):
        message = f"ClusterProfile {wanted.name} exists and was not generated for this Profile"
        return await rollout_common.report_invalid(ctx, obj, raw, KIND, message)
    if current is None or not _holds(current, wanted):
        await ops.apply(ctx.client, _body(ctx, wanted))
        current = ctx.cache.get("ClusterProfile", None, wanted.name)
    written, _ = await ctx.write_status(
        KIND, Versioned.of(obj), mirror(raw, wanted.name, current, ctx.clock())
    )
    return Result(requeue=written is StatusWrite.CONFLICT)


def _tenants(ctx: Context, namespace: str) -> tuple[str, ...]:
    """The ServiceAccounts of `namespace` RoleRequests grant rules to (ADR 0111), sorted."""
    if "RoleRequest" not in ctx.cache.informers:
        return ()
    names = {
        str(spec.get("serviceAccountName"))
        for raw in ctx.cache.list("RoleRequest")
        if (spec := raw.get("spec") or {}).get("serviceAccountNamespace") == namespace
    }
    return tuple(sorted(names))


def set_clusters(ctx: Context, namespace: str, raw: Mapping[str, Any]) -> frozenset[str]:
    """The members the Sets named by the Profile's setRefs (Sets of its own namespace) have chosen."""
    names = [str(n) for n in (raw.get("spec") or {}).get("setRefs") or []]
    if not names or "Set" not in ctx.cache.informers:
        return frozenset()
    return sets.clusters_of_sets(names, {n: ctx.cache.get("Set", namespace, n) for n in names})


def profiles_naming_set(ctx: Context, obj: Any) -> list[str]:
    """The Profiles of a Set's namespace whose setRefs name it (the Profile controller's watch)."""
    meta = as_dict(obj).get("metadata") or {}
    namespace, name = meta.get("namespace"), meta.get("name")
    return [
        f"{namespace}/{p['metadata']['name']}"
        for p in ctx.cache.list(KIND)
        if p["metadata"].get("namespace") == namespace
        and name in ((p.get("spec") or {}).get("setRefs") or [])
    ]


def _generate(
    raw: Mapping[str, Any], tenants: tuple[str, ...] = (), chosen: frozenset[str] = frozenset()
) -> profile_scope.Generated:
    meta = raw["metadata"]
    try:
        parsed = sveltos.Profile.model_validate({**raw, "status": None})
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(part) for part in first.get("loc", ())) or "spec"
        raise profile_scope.Refused(f"{where}: {first.get('msg', 'invalid')}") from None
    spec = parsed.spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    return profile_scope.generate(
        str(meta["namespace"]), str(meta["name"]), spec, meta.get("labels"), tenants, chosen
    )


def _holds(current: Mapping[str, Any], wanted: profile_scope.Generated) -> bool:
    """Whether the cached generated profile already carries the wanted spec, labels and annotations
    (the API server's defaults filled in from what it stored)."""
    meta = current.get("metadata") or {}
    spec = current.get("spec") or {}
    stored = {**{k: v for k, v in spec.items() if k not in wanted.spec}, **wanted.spec}
    labels = meta.get("labels") or {}
    return (
        not meta.get("deletionTimestamp")
        and spec == stored
        and all(labels.get(k) == v for k, v in wanted.labels.items())
        # A tenant admin that went away must go from the generated profile too (ADR 0111).
        and tenancy.tenant_labels(labels) == tenancy.tenant_labels(wanted.labels)
        and rollout_common.annotations_hold(current, wanted.annotations)
    )


def _body(ctx: Context, wanted: profile_scope.Generated) -> dict[str, Any]:
    return {
        "apiVersion": ctx.api_version("ClusterProfile"),
        "kind": "ClusterProfile",
        "metadata": {
            "name": wanted.name,
            "labels": dict(wanted.labels),
            "annotations": dict(wanted.annotations),
        },
        "spec": dict(wanted.spec),
    }


def mirror(
    raw: Mapping[str, Any], generated: str, current: Mapping[str, Any] | None, now: datetime
) -> dict[str, Any]:
    """The Profile's status: its generated profile's, under the Profile's generation, and the names
    of its summaries (pure)."""
    status = (current or {}).get("status") or {}
    generation = (raw.get("metadata") or {}).get("generation")
    out: dict[str, Any] = {k: status[k] for k in MIRRORED if status.get(k) is not None}
    out["clusterProfileName"] = generated
    matching = status.get("matchingClusters") or []
    out["clusterSummaries"] = sorted(ss.summary_name(generated, str(c.get("name"))) for c in matching)
    conditions = status.get("conditions") or []
    if not conditions or not _observed(current):
        message = f"waiting for ClusterProfile {generated} to be reconciled"
        conditions = [_condition("Ready", "False", "Generating", message, raw, now)]
    out["conditions"] = [{**c, "observedGeneration": generation} for c in conditions]
    return out


def _observed(current: Mapping[str, Any] | None) -> bool:
    """Whether the generated profile's conditions speak of its current spec."""
    if current is None:
        return False
    generation = (current.get("metadata") or {}).get("generation")
    conditions = (current.get("status") or {}).get("conditions") or []
    return bool(conditions) and all(c.get("observedGeneration") == generation for c in conditions)


def _condition(
    kind: str, status: str, reason: str, message: str, raw: Mapping[str, Any], now: datetime
) -> dict[str, Any]:
    previous: Mapping[str, Any] = next(
        (c for c in (raw.get("status") or {}).get("conditions") or [] if c.get("type") == kind), {}
    )
    same = previous.get("status") == status and previous.get("reason") == reason
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": previous.get("lastTransitionTime") if same else timestamps.fmt(now),
    }


async def _withdraw(ctx: Context, obj: Any, raw: Mapping[str, Any], finalizers: list[str]) -> Result:
    """Delete the generated profile; the finalizer goes once it and its summaries are gone."""
    if FINALIZER not in finalizers:
        return Result()
    meta = raw["metadata"]
    name = profile_scope.generated_name(str(meta["namespace"]), str(meta["name"]))
    current = ctx.cache.get("ClusterProfile", None, name)
    if current is not None and profile_scope.owner_of(current) == (meta["namespace"], meta["name"]):
        if not (current.get("metadata") or {}).get("deletionTimestamp"):
            await ops.delete_if_exists(ctx.client, ctx.resource("ClusterProfile"), name)
            await ctx.event(obj, False, "Withdrawing", f"deleted ClusterProfile {name}: withdrawing")
        return Result(requeue_after=RECHECK)
    if ctx.cache.labelled("ClusterSummary", ss.PROFILE_LABEL, name):
        return Result(requeue_after=RECHECK)
    await _set_finalizers(ctx, meta, [f for f in finalizers if f != FINALIZER])
    return Result()


async def _delete_orphan(ctx: Context, namespace: str, name: str) -> None:
    """A Profile gone without its finalizer (removed by hand): its generated profile goes too."""
    generated = profile_scope.generated_name(namespace, name)
    current = ctx.cache.get("ClusterProfile", None, generated)
    if current is None or profile_scope.owner_of(current) != (namespace, name):
        return
    if not (current.get("metadata") or {}).get("deletionTimestamp"):
        await ops.delete_if_exists(ctx.client, ctx.resource("ClusterProfile"), generated)


async def _set_finalizers(ctx: Context, meta: Mapping[str, Any], finalizers: list[str]) -> None:
    # Guarded by resourceVersion: a concurrent edit makes this fail and the watch brings us back.
    body = {"metadata": {"finalizers": finalizers, "resourceVersion": meta.get("resourceVersion")}}
    await ops.merge_patch(
        ctx.client, ctx.resource(KIND), str(meta["name"]), body, namespace=str(meta["namespace"])
    )


def profile_of(cluster_profile: Any) -> list[str]:
    """The Profile key (`namespace/name`) a ClusterProfile event concerns: its generator's."""
    owner = profile_scope.owner_of(as_dict(cluster_profile))
    return [] if owner is None else [f"{owner[0]}/{owner[1]}"]


def generated_of(key: str) -> str:
    """The name of the ClusterProfile generated for Profile `namespace/name`."""
    namespace, _, name = key.partition("/")
    return profile_scope.generated_name(namespace, name)

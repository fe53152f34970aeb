"""The override controller: every ClusterResourceOverride and ResourceOverride is snapshotted.

As upstream: a spec change cuts `<override>-<index>` (index from 0) labelled is-latest-snapshot,
parent-resource-override and override-index, holding the spec and its hash; older snapshots lose the
latest label and at most HISTORY remain. An override that is gone takes its snapshots with it (its
delete event brings its key here; placements already ignore the snapshots of a missing override, so
a controller that was down when it went is harmless).
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from fleetwave.api import codec
from fleetwave.api.objects import Obj
from fleetwave.controllers.kubefleet import naming as nm
from fleetwave.controllers.kubefleet import overrides as ov
from fleetwave.controllers.shared.context import Context
from fleetwave.delivery import content as dc
from fleetwave.kube import kinds, ops
from fleetwave.runtime.controller import Result

HISTORY = 10  # upstream's default override revision history


def spec_hash(spec: Mapping[str, Any]) -> str:
    """Upstream's overrideHash: the bytes of the spec's sha256 hex digest (base64 on the wire)."""
    digest = hashlib.sha256(dc.canonical_json(dict(spec)).encode()).hexdigest()
    return base64.b64encode(digest.encode()).decode()


@dataclass(frozen=True, slots=True)
class Plan:
    create: dict[str, Any] | None = None
    unmark: tuple[str, ...] = ()
    delete: tuple[str, ...] = ()


def of_override(snapshots: Iterable[Obj], name: str, namespace: str | None) -> list[Obj]:
    """The override's snapshots, oldest first."""
    mine = [
        s
        for s in snapshots
        if ov.parent_of(s) == name
        and (s.get("metadata") or {}).get("namespace") == namespace
        and ov.index_of(s) is not None
    ]
    return sorted(mine, key=lambda s: ov.index_of(s) or 0)


def plan(kind: str, name: str, namespace: str | None, spec: Obj | None, existing: list[Obj]) -> Plan:
    """What makes the snapshots reflect the override's `spec` (None: the override is gone)."""
    if spec is None:
        return Plan(delete=tuple(_name(s) for s in existing))
    digest = spec_hash(spec)
    newest = existing[-1] if existing else None
    if newest is not None and ((newest.get("spec") or {}).get("overrideHash")) == digest:
        stale = tuple(_name(s) for s in existing[:-1] if _latest(s))
        return Plan(unmark=stale, delete=_overflow(existing, HISTORY))
    index = (ov.index_of(newest) or 0) + 1 if newest is not None else 0
    meta: dict[str, Any] = {
        "name": f"{name}-{index}",
        "labels": {nm.LATEST_LABEL: "true", ov.PARENT_LABEL: name, ov.INDEX_LABEL: str(index)},
    }
    if namespace is not None:
        meta["namespace"] = namespace
    body = {
        "apiVersion": f"{kinds.GROUP}/{kinds.VERSION}",
        "kind": ov.SNAPSHOT_KIND[kind],
        "metadata": meta,
        "spec": {"overrideSpec": dict(spec), "overrideHash": digest},
    }
    unmark = tuple(_name(s) for s in existing if _latest(s))
    return Plan(create=body, unmark=unmark, delete=_overflow(existing, HISTORY - 1))


def _overflow(existing: list[Obj], keep: int) -> tuple[str, ...]:
    extra = len(existing) - max(keep, 0)
    return tuple(_name(s) for s in existing[: max(extra, 0)])


def _name(s: Obj) -> str:
    return str((s.get("metadata") or {}).get("name"))


def _latest(s: Obj) -> bool:
    return ((s.get("metadata") or {}).get("labels") or {}).get(nm.LATEST_LABEL) == "true"


def normalized_spec(kind: str, obj: Obj) -> dict[str, Any]:
    """The override's spec with defaults filled in, so an equivalent edit cuts no snapshot; raises
    codec.ManifestError when it does not parse."""
    body = {**obj, "apiVersion": f"{kinds.GROUP}/{kinds.VERSION}", "kind": kind}
    parsed = codec.parse_object(body)
    spec: dict[str, Any] = parsed.spec.model_dump(mode="json", by_alias=True, exclude_none=True)  # type: ignore[attr-defined]
    return spec


async def reconcile(ctx: Context, kind: str, key: str) -> Result:
    namespace, name = nm.split_key(key)
    obj = ctx.cache.get(kind, namespace, name)
    try:
        spec = normalized_spec(kind, obj) if obj is not None else None
    except codec.ManifestError as e:
        # What the CRD cannot refuse (a value on remove): not snapshotted, and said where it shows.
        await ctx.event(ctx.cache.obj(kind, namespace, name), True, "InvalidOverride", str(e)[:1024])
        return Result()
    snapshot_kind = ov.SNAPSHOT_KIND[kind]
    existing = of_override(ctx.cache.list(snapshot_kind), name, namespace)
    todo = plan(kind, name, namespace, spec, existing)
    resource = ctx.resource(snapshot_kind)
    if todo.create is not None:
        body = {**todo.create, "apiVersion": ctx.api_version(snapshot_kind)}
        try:
            if not await ops.create_if_absent(ctx.client, body):
                return Result(requeue_after=1.0)  # a snapshot of that name exists: the cache lags
        except ops.StatusError as e:
            if ops.code_of(e) in (403, 404):
                return Result()  # the namespace is being deleted
            raise
    for old in todo.unmark:
        try:
            await ops.merge_patch(
                ctx.client,
                resource,
                old,
                {"metadata": {"labels": {nm.LATEST_LABEL: "false"}}},
                namespace=namespace,
            )
        except ops.StatusError as e:
            if not ops.is_not_found(e):
                raise
    for old in todo.delete:
        await ops.delete_if_exists(ctx.client, resource, old, namespace=namespace)
    return Result()

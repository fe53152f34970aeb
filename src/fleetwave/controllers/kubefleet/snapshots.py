"""Indexed, immutable resource snapshots of a placement: when to cut a new one, what to prune (pure).

A new snapshot `<placement>-<index>-snapshot` is cut whenever the hash of the selected content
differs from the newest snapshot's; only the newest carries `is-latest-snapshot=true`, and the
oldest are deleted so that at most revisionHistoryLimit remain. The newest is found by index, not
by label, so a cache that has not yet seen a label flip never yields two "latest" snapshots.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from fleetwave.api.objects import Obj
from fleetwave.controllers.kubefleet import naming as nm
from fleetwave.delivery import content as dc
from fleetwave.kube import kinds


def content_hash(selected: list[dict[str, Any]]) -> str:
    """sha256 of the JSON of the snapshot spec, as upstream's resource-hash annotation."""
    return hashlib.sha256(dc.canonical_json({"selectedResources": selected}).encode()).hexdigest()


def index_of(snapshot: Obj) -> int | None:
    raw = ((snapshot.get("metadata") or {}).get("labels") or {}).get(nm.INDEX_LABEL)
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


def of_placement(snapshots: Iterable[Obj], placement: str, namespace: str | None) -> list[Obj]:
    """The placement's snapshots, oldest first."""
    mine = [
        s
        for s in snapshots
        if ((s.get("metadata") or {}).get("labels") or {}).get(nm.PARENT_LABEL) == placement
        and (s.get("metadata") or {}).get("namespace") == namespace
        and index_of(s) is not None
    ]
    return sorted(mine, key=lambda s: index_of(s) or 0)


def find(snapshots: Iterable[Obj], index: int) -> Obj | None:
    return next((s for s in snapshots if index_of(s) == index), None)


def hash_of(snapshot: Obj) -> str:
    annotations = (snapshot.get("metadata") or {}).get("annotations") or {}
    return str(annotations.get(nm.HASH_ANNOTATION) or content_hash(list(_selected(snapshot))))


def _selected(snapshot: Obj) -> list[dict[str, Any]]:
    return list((snapshot.get("spec") or {}).get("selectedResources") or [])


def resources(snapshot: Obj) -> list[dict[str, Any]]:
    return _selected(snapshot)


@dataclass(frozen=True, slots=True)
class Plan:
    create: dict[str, Any] | None = None
    unmark: tuple[str, ...] = ()  # snapshots whose is-latest label must become "false"
    delete: tuple[str, ...] = ()
    latest: int | None = None  # index of the newest snapshot once the plan is carried out


def plan(
    existing: list[Obj],
    selected: list[dict[str, Any]],
    *,
    kind: str,
    placement: str,
    namespace: str | None,
    limit: int,
) -> Plan:
    """What to do so the placement's snapshots reflect `selected`; `existing` is oldest first."""
    digest = content_hash(selected)
    newest = existing[-1] if existing else None
    if newest is not None and hash_of(newest) == digest:
        stale = tuple(_name(s) for s in existing[:-1] if _is_latest(s))
        return Plan(unmark=stale, delete=_overflow(existing, limit), latest=index_of(newest))
    index = (index_of(newest) or 0) + 1 if newest is not None else 0
    body = snapshot_body(kind, placement, namespace, index, selected, digest)
    unmark = tuple(_name(s) for s in existing if _is_latest(s))
    # Room for the new one: keep limit-1 of the existing.
    return Plan(create=body, unmark=unmark, delete=_overflow(existing, limit - 1), latest=index)


def _overflow(existing: list[Obj], keep: int) -> tuple[str, ...]:
    extra = len(existing) - max(keep, 0)
    return tuple(_name(s) for s in existing[: max(extra, 0)])


def _name(s: Obj) -> str:
    return str((s.get("metadata") or {}).get("name"))


def _is_latest(s: Obj) -> bool:
    return ((s.get("metadata") or {}).get("labels") or {}).get(nm.LATEST_LABEL) == "true"


def snapshot_body(
    kind: str, placement: str, namespace: str | None, index: int, selected: list[dict[str, Any]], digest: str
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": nm.snapshot_name(placement, index),
        "labels": {nm.LATEST_LABEL: "true", nm.PARENT_LABEL: placement, nm.INDEX_LABEL: str(index)},
        "annotations": {nm.HASH_ANNOTATION: digest},
    }
    if namespace is not None:
        meta["namespace"] = namespace
    return {
        "apiVersion": f"{kinds.GROUP}/{kinds.VERSION}",
        "kind": kind,
        "metadata": meta,
        "spec": {"selectedResources": selected},
    }

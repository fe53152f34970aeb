"""KubeFleet envelopes in placements (ADR 0092), pure: check what one wraps, and unwrap per cluster.

A ResourceEnvelope / ClusterResourceEnvelope is selected and snapshotted like any object (the hub
keeps the envelope, never its contents); a member gets the objects under its `data` instead. As
upstream: a ClusterResourceEnvelope wraps cluster-scoped objects only, a ResourceEnvelope namespaced
objects of its own namespace only. fleetwave adds: no envelope inside an envelope, none of
fleetwave's (or its upstreams') own kinds, every entry an object with apiVersion, kind and name.
A wrong envelope is refused when the placement selects it, so a snapshot never holds one and
unwrapping cannot fail.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from fleetwave.api.objects import Obj
from fleetwave.controllers.fleet.local_boundary import OWN_GROUPS

CLUSTER = "ClusterResourceEnvelope"
NAMESPACED = "ResourceEnvelope"
KINDS = (CLUSTER, NAMESPACED)
GROUPS = frozenset({"placement.kubernetes-fleet.io", "fleetwave.io"})  # upstream's, or served natively


class EnvelopeError(ValueError):
    """What an envelope wraps cannot be placed; names the envelope and the entry."""


def is_envelope(obj: Obj) -> bool:
    group = str(obj.get("apiVersion") or "").rpartition("/")[0]
    return obj.get("kind") in KINDS and group in GROUPS


def check(envelope: Obj) -> None:
    """Raise EnvelopeError unless every entry may be placed from this envelope."""
    meta = envelope.get("metadata") or {}
    namespace = meta.get("namespace")
    where = f"{envelope.get('kind')} {namespace + '/' if namespace else ''}{meta.get('name')}"
    data = envelope.get("data")
    if not isinstance(data, Mapping) or not data:
        raise EnvelopeError(f"{where}: data must hold at least one manifest")
    for key in sorted(data):
        _check_entry(envelope, where, str(key), data[key], namespace)


def _check_entry(envelope: Obj, where: str, key: str, entry: Any, namespace: str | None) -> None:
    at = f"{where} [{key[:100]}]"
    if not isinstance(entry, Mapping) or not entry.get("apiVersion") or not entry.get("kind"):
        raise EnvelopeError(f"{at}: not a Kubernetes object with apiVersion and kind")
    inner = entry.get("metadata") or {}
    if not isinstance(inner, Mapping) or not inner.get("name"):
        raise EnvelopeError(f"{at}: {str(entry['kind'])[:63]} without metadata.name")
    group = str(entry["apiVersion"]).rpartition("/")[0]
    if is_envelope(entry) or group in OWN_GROUPS:
        raise EnvelopeError(f"{at}: {str(entry['kind'])[:63]} of {group} cannot be wrapped")
    inner_ns = inner.get("namespace")
    if envelope.get("kind") == CLUSTER and inner_ns:
        raise EnvelopeError(f"{at}: a namespaced object cannot be wrapped in a ClusterResourceEnvelope")
    if envelope.get("kind") == NAMESPACED and not inner_ns:
        raise EnvelopeError(
            f"{at}: a cluster-scoped object (no namespace) cannot be wrapped in a ResourceEnvelope"
        )
    if envelope.get("kind") == NAMESPACED and inner_ns != namespace:
        raise EnvelopeError(
            f"{at}: an object of namespace {str(inner_ns)[:63]} cannot be wrapped in an envelope of "
            f"{namespace}"
        )


def unwrap(objects: Sequence[Obj]) -> list[dict[str, Any]]:
    """The objects a member gets: each envelope replaced by what it wraps (in key order)."""
    out: list[dict[str, Any]] = []
    for obj in objects:
        if is_envelope(obj):
            data = obj.get("data") or {}
            out.extend(copy.deepcopy(dict(data[k])) for k in sorted(data))
        else:
            out.append(dict(obj))
    return out


def wrapped_kinds(objects: Iterable[Obj]) -> set[tuple[str, str]]:
    """(apiVersion, kind) of everything the envelopes among `objects` wrap."""
    return {
        (str(entry.get("apiVersion")), str(entry.get("kind")))
        for obj in objects
        if is_envelope(obj)
        for entry in (obj.get("data") or {}).values()
        if isinstance(entry, Mapping)
    }

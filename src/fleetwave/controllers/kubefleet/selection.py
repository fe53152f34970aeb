"""Which management-cluster objects a placement selects, cleaned into applicable manifests (pure).

A ClusterResourcePlacement selects Namespaces (with everything of a supported kind inside them,
only the namespace, or the namespace plus what its other selectors match) and cluster-scoped objects
by kind and name or labels; a ResourcePlacement selects namespaced objects in its own namespace.
Server-populated fields are stripped so a snapshot changes only when the user's content does.

The supported kinds are the built-in ones of `fleetwave.kube.placeable` plus those the controller is
configured to place (`--placement-kind`, ADR 0091): CRDs, custom resources, Ingresses, ... each read
through its own informer, which is why they must be named (the controller needs the right to list
and watch them).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fleetwave.api.kubefleet import PlacementSpec, ResourceSelector
from fleetwave.api.meta import LabelSelector
from fleetwave.api.objects import Obj
from fleetwave.controllers.fleet import members
from fleetwave.controllers.kubefleet import envelopes
from fleetwave.controllers.shared.watch_scope import unwatched
from fleetwave.kube import kinds, placeable


@dataclass(frozen=True, slots=True)
class Kind:
    name: str  # the kind
    api_version: str
    namespaced: bool
    group: str
    version: str
    cache: str = ""  # the informer/cache name: the kind for built-ins, `Kind.version.group` otherwise

    @property
    def key(self) -> str:
        return self.cache or self.name

    @classmethod
    def configured(cls, info: kinds.KindInfo) -> Kind:
        """A kind the controller was told to place (ADR 0091)."""
        gvk = info.gvk
        cache = f"{gvk.kind}.{gvk.version}.{gvk.group or 'core'}"
        return cls(gvk.kind, gvk.api_version, info.namespaced, gvk.group, gvk.version, cache=cache)

    @classmethod
    def builtin(cls, info: kinds.KindInfo) -> Kind:
        """A kind every placement may select (`kube.placeable`), cached under its kind name."""
        gvk = info.gvk
        return cls(gvk.kind, gvk.api_version, info.namespaced, gvk.group, gvk.version)


def envelope_kinds(api_version: str) -> tuple[Kind, ...]:
    """KubeFleet's envelopes, in the group the controller serves them in (ADR 0092)."""
    group, _, version = api_version.rpartition("/")
    return (
        Kind(envelopes.CLUSTER, api_version, False, group, version),
        Kind(envelopes.NAMESPACED, api_version, True, group, version),
    )


def configured(infos: Iterable[kinds.KindInfo]) -> tuple[Kind, ...]:
    """The configured kinds that are not built-in ones (those are always placed)."""
    out = []
    for info in infos:
        builtin = KINDS.get(info.gvk.kind)
        if builtin is None or builtin.group != info.gvk.group:
            out.append(Kind.configured(info))
    return tuple(out)


NAMESPACED_KINDS = tuple(Kind.builtin(i) for i in placeable.BUILTIN if i.namespaced)
CLUSTER_KINDS = tuple(Kind.builtin(i) for i in placeable.BUILTIN if not i.namespaced)
# Within each scope, the registry's order is the order of a snapshot's objects (see `_ordered`).
KINDS = {k.name: k for k in (*CLUSTER_KINDS, *NAMESPACED_KINDS)}
_STRIP_ANNOTATIONS = ("kubectl.kubernetes.io/last-applied-configuration", "deployment.kubernetes.io/revision")
_JOB_LABELS = (
    "controller-uid",
    "job-name",
    "batch.kubernetes.io/controller-uid",
    "batch.kubernetes.io/job-name",
)


class SelectionError(ValueError):
    """A selector the placement cannot honour (unsupported kind, wrong scope); names the field."""


def reserved(namespace: str) -> bool:
    return namespace == "default" or namespace.startswith(("kube-", "fleet-", "fleetwave-"))


# objects of one kind from the cache, as plain dicts
Lister = Callable[[str], Iterable[Obj]]


def registry(extra: Sequence[Kind] = ()) -> dict[str, Kind]:
    """Every kind a placement may select, by cache key: built-ins first, then the configured ones."""
    out = dict(KINDS)
    for kind in extra:
        builtin = KINDS.get(kind.name)
        if builtin is None or builtin.group != kind.group:
            out[kind.key] = kind
    return out


def _kind_of(sel: ResourceSelector, path: str, known: Mapping[str, Kind]) -> Kind:
    matching = [k for k in known.values() if k.name == sel.kind and _same_group(k, sel.group)]
    # An envelope's version is whichever the served group has (v1beta1 upstream, v1alpha1 natively).
    exact = [k for k in matching if not sel.version or k.version == sel.version or k.name in envelopes.KINDS]
    if not exact:
        supported = ", ".join(sorted(f"{k.group or 'core'}/{k.name}" for k in known.values()))
        raise SelectionError(
            f"{path}: {sel.group or 'core'}/{sel.kind} is not supported (supported: {supported}; other"
            " kinds are placed once the controller is told to with --placement-kind)"
        )
    return exact[0]


def _same_group(kind: Kind, group: str) -> bool:
    """An envelope is named in upstream's group or fleetwave's, whichever the controller serves."""
    if kind.name in envelopes.KINDS and kind.group in envelopes.GROUPS:
        return group in envelopes.GROUPS
    return kind.group == group


def _matches(sel: ResourceSelector, obj: Obj) -> bool:
    meta = obj.get("metadata") or {}
    if sel.name is not None:
        return bool(meta.get("name") == sel.name)
    if sel.label_selector is not None:
        return sel.label_selector.matches(dict(meta.get("labels") or {}))
    return True


def may_select(
    selectors: object, kind: str, namespace: str | None, namespace_labels: Mapping[str, str] | None
) -> bool:
    """Whether a change to an object can change what a ClusterResourcePlacement with these raw
    `spec.resourceSelectors` selects: a namespaced object (in `namespace`) only through a Namespace
    selector that takes its namespace (`namespace_labels`: the namespace's labels, None while the
    namespace is not known); a cluster-scoped one only through a selector of its `kind`. Coarse on
    purpose: a wake too many costs one pass, a wake too few a missed change, so anything unreadable
    wakes."""
    if not isinstance(selectors, list):
        return False
    return any(
        isinstance(raw, Mapping) and _wakes(raw, kind, namespace, namespace_labels) for raw in selectors
    )


def _wakes(
    raw: Mapping[str, Any], kind: str, namespace: str | None, labels: Mapping[str, str] | None
) -> bool:
    if namespace is None:
        return bool(raw.get("kind") == kind)
    return raw.get("kind") == "Namespace" and _takes_namespace(raw, namespace, labels)


def _takes_namespace(raw: Mapping[str, Any], namespace: str, labels: Mapping[str, str] | None) -> bool:
    if raw.get("name") is not None:
        return bool(raw.get("name") == namespace)
    if raw.get("labelSelector") is None or labels is None:
        return True
    try:
        return LabelSelector.model_validate(raw["labelSelector"]).matches(dict(labels))
    except ValueError:  # pydantic's ValidationError: the placement's own pass reports it
        return True


def _generated(kind: Kind, obj: Obj) -> bool:
    """Objects the API server or a controller made, which follow their owner instead."""
    meta = obj.get("metadata") or {}
    if any(r.get("controller") for r in meta.get("ownerReferences") or []):
        return True
    name = meta.get("name")
    if kind.name == "ConfigMap" and name == "kube-root-ca.crt":
        return True
    if kind.name == "ServiceAccount" and name == "default":
        return True
    return kind.name == "Secret" and obj.get("type") == "kubernetes.io/service-account-token"


def select(
    spec: PlacementSpec,
    lister: Lister,
    *,
    namespace: str | None,
    credentials: frozenset[tuple[str, str]] = frozenset(),
    watched: frozenset[str] | None = None,
    extra: Sequence[Kind] = (),
) -> list[dict[str, Any]]:
    """The cleaned manifests selected by `spec`; `namespace` is set for a ResourcePlacement.
    `credentials`: the (namespace, name) of every Secret a member cluster names as its kubeconfig.
    `watched`: the namespaces the controller reads (None: all); selecting the content of another is
    refused, since placing the namespace without what the controller cannot see would be half of it.
    `extra`: the kinds the controller is configured to place besides the built-in ones."""
    known = registry(extra)
    chosen: dict[tuple[str, str, str], dict[str, Any]] = {}

    def add(kind: Kind, obj: Obj) -> None:
        # A member cluster's kubeconfig is a credential of fleetwave's, never content to hand out.
        credential = kind.name == "Secret" and members.is_kubeconfig_secret(obj, credentials)
        if not _generated(kind, obj) and not credential:
            body = clean(kind, obj)
            if envelopes.is_envelope(body):
                try:
                    envelopes.check(body)
                except envelopes.EnvelopeError as e:
                    raise SelectionError(f"spec.resourceSelectors: {e}") from None
            meta = body["metadata"]
            chosen[(kind.key, meta.get("namespace") or "", meta["name"])] = body

    typed = [
        (_kind_of(sel, f"spec.resourceSelectors[{i}]", known), sel)
        for i, sel in enumerate(spec.resource_selectors)
    ]
    inner = [(k, sel) for k, sel in typed if k.namespaced]
    if namespace is not None:
        for i, (kind, _sel) in enumerate(typed):
            if not kind.namespaced:
                raise SelectionError(
                    f"spec.resourceSelectors[{i}]: a ResourcePlacement selects namespaced kinds only"
                )
        _select_in(inner, lister, {namespace}, add, known)
        return _ordered(chosen, known)
    whole, picked = _cluster_scoped(typed, lister, add)
    for name in sorted(whole | picked):
        problem = unwatched(name, watched)
        if problem:
            raise SelectionError(f"spec.resourceSelectors: selects the content of {problem}")
    if inner and not picked:
        raise SelectionError(
            "spec.resourceSelectors: namespaced kinds need a Namespace selector with"
            " selectionScope NamespaceWithResourceSelectors"
        )
    _select_in([], lister, whole, add, known)
    _select_in(inner, lister, picked, add, known)
    return _ordered(chosen, known)


def _cluster_scoped(
    typed: list[tuple[Kind, ResourceSelector]], lister: Lister, add: Callable[[Kind, Obj], None]
) -> tuple[set[str], set[str]]:
    """Adds the cluster-scoped objects; returns namespaces taken whole and those filtered by selectors."""
    whole: set[str] = set()
    filtered: set[str] = set()
    for kind, sel in typed:
        if kind.namespaced:
            continue
        for obj in lister(kind.key):
            name = str((obj.get("metadata") or {}).get("name"))
            if not _matches(sel, obj) or (kind.name == "Namespace" and reserved(name)):
                continue
            add(kind, obj)
            scope = sel.selection_scope or "NamespaceWithResources"
            if kind.name == "Namespace" and scope == "NamespaceWithResources":
                whole.add(name)
            elif kind.name == "Namespace" and scope == "NamespaceWithResourceSelectors":
                filtered.add(name)
    return whole, filtered


def _select_in(
    selectors: list[tuple[Kind, ResourceSelector]],
    lister: Lister,
    namespaces: set[str],
    add: Callable[[Kind, Obj], None],
    known: Mapping[str, Kind],
) -> None:
    """Namespaced objects in `namespaces`: every supported one, or those `selectors` match."""
    if not namespaces:
        return
    for kind in (k for k in known.values() if k.namespaced):
        for obj in lister(kind.key):
            if (obj.get("metadata") or {}).get("namespace") not in namespaces:
                continue
            if not selectors or any(k is kind and _matches(sel, obj) for k, sel in selectors):
                add(kind, obj)


def _ordered(
    chosen: Mapping[tuple[str, str, str], dict[str, Any]], known: Mapping[str, Kind]
) -> list[dict[str, Any]]:
    """Cluster-scoped kinds before namespaced ones (CRDs and namespaces before what lives in them),
    then the registry's order, then namespace and name: a stable snapshot."""
    order = {key: (kind.namespaced, i) for i, (key, kind) in enumerate(known.items())}
    return [chosen[k] for k in sorted(chosen, key=lambda k: (order[k[0]], k[1], k[2]))]


def clean(kind: Kind, obj: Obj) -> dict[str, Any]:
    """The object as a user would write it: identity, labels, annotations and content only."""
    meta = obj.get("metadata") or {}
    out_meta: dict[str, Any] = {"name": meta["name"]}
    if kind.namespaced:
        out_meta["namespace"] = meta.get("namespace")
    labels = dict(meta.get("labels") or {})
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k not in _STRIP_ANNOTATIONS}
    if labels:
        out_meta["labels"] = labels
    if annotations:
        out_meta["annotations"] = annotations
    body = {
        k: copy.deepcopy(v) for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata", "status")
    }
    _strip_generated_spec(kind.name, body)
    return {"apiVersion": kind.api_version, "kind": kind.name, "metadata": out_meta, **body}


def _strip_generated_spec(kind: str, body: dict[str, Any]) -> None:
    spec = body.get("spec")
    if not isinstance(spec, dict):
        return
    if kind == "Service":
        # Allocated per cluster from its own service range: never carried across clusters.
        for key in ("clusterIP", "clusterIPs"):
            spec.pop(key, None)
    if kind == "Job":
        # Generated from the Job's uid on creation; a member generates its own.
        spec.pop("selector", None)
        spec.pop("manualSelector", None)
        labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels")
        if isinstance(labels, dict):
            for key in _JOB_LABELS:
                labels.pop(key, None)

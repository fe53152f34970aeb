"""How health checks read a cluster: the ResourceReader protocol and its two implementations.

`DictResourceReader` serves a fixed list of objects (unit tests, `fleetwave plan`);
`KubeResourceReader` reads a live cluster through the access package (`fleetwave.kube`), which finds
plurals and scope. Namespace semantics, shared by both: a namespace
filter selects namespaced objects only; cluster-scoped objects ignore it (ADR 0040).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from fleetwave.api.objects import ObjDict
from fleetwave.health import selectors
from fleetwave.kube import client as kubeclient
from fleetwave.kube import kinds, ops
from fleetwave.kube import selectors as kube_selectors


class KindNotServed(LookupError):
    """The cluster does not serve this apiVersion/kind (CRD absent, typo in group/version/kind)."""


class ResourceReader(Protocol):
    def list(
        self, api_version: str, kind: str, *, namespace: str | None, label_selector: str | None
    ) -> list[ObjDict]: ...

    def get(self, api_version: str, kind: str, *, namespace: str | None, name: str) -> ObjDict | None: ...


def _meta(obj: ObjDict) -> dict[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


class DictResourceReader:
    """An in-memory cluster. Objects without `metadata.namespace` count as cluster-scoped."""

    def __init__(self, objects: Iterable[ObjDict]) -> None:
        self._objects = list(objects)

    def list(
        self, api_version: str, kind: str, *, namespace: str | None, label_selector: str | None
    ) -> list[ObjDict]:
        reqs = selectors.parse(label_selector)
        return [
            o
            for o in self._objects
            if o.get("apiVersion") == api_version
            and o.get("kind") == kind
            and (not namespace or _meta(o).get("namespace") in (None, "", namespace))
            and selectors.matches(reqs, _meta(o).get("labels"))
        ]

    def get(self, api_version: str, kind: str, *, namespace: str | None, name: str) -> ObjDict | None:
        for o in self.list(api_version, kind, namespace=namespace, label_selector=None):
            if _meta(o).get("name") == name:
                return o
        return None


class KubeResourceReader:
    """A live cluster through a sync client. Kinds are resolved by the access package's resolver
    (one per reader): answers are remembered, "not served" is not, so a CRD installed later is found."""

    def __init__(self, client: kubeclient.Client) -> None:
        self._api = client
        self._kinds = kinds.SyncKinds(client)

    def list(
        self, api_version: str, kind: str, *, namespace: str | None, label_selector: str | None
    ) -> list[ObjDict]:
        info, resource = self._kind(api_version, kind)
        # A list of pairs (lightkube accepts it) keeps repeated keys such as `a!=x,a!=y`.
        labels: Any = kube_selectors.label_pairs(selectors.parse(label_selector)) or None
        if info.namespaced:
            items = self._api.list(resource, namespace=namespace or ops.ALL_NAMESPACES, labels=labels)
        else:
            items = self._api.list(resource, labels=labels)
        return [_complete(dict(o), api_version, kind) for o in items]

    def get(self, api_version: str, kind: str, *, namespace: str | None, name: str) -> ObjDict | None:
        info, resource = self._kind(api_version, kind)
        if info.namespaced and not namespace:
            raise ValueError(f"{kind} is namespaced: a namespace is needed to get {name!r}")
        try:
            obj = self._api.get(resource, name, namespace=namespace if info.namespaced else None)
        except ops.ApiError as e:
            if ops.code_of(e) == ops.NOT_FOUND:
                return None
            raise
        return _complete(dict(obj), api_version, kind)

    def _kind(self, api_version: str, kind: str) -> tuple[kinds.KindInfo, Any]:
        try:
            info = self._kinds.resolve(kinds.GVK(api_version, kind))
        except kinds.UnknownKind as e:
            raise KindNotServed(str(e)) from e
        return info, kinds.resource_class(info)


def _complete(obj: ObjDict, api_version: str, kind: str) -> ObjDict:
    # Items of a LIST response carry no apiVersion/kind; scripts and messages expect them.
    obj.setdefault("apiVersion", api_version)
    obj.setdefault("kind", kind)
    return obj

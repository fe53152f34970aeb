"""How health checks read a cluster: the ResourceReader protocol and its two implementations.

`DictResourceReader` serves a fixed list of objects (unit tests, `fleetwave plan`);
`KubeResourceReader` reads a live cluster through lightkube generic resources, finding plurals and
scope through the API server's discovery documents. Namespace semantics, shared by both: a namespace
filter selects namespaced objects only; cluster-scoped objects ignore it (ADR 0040).

may import: stdlib, lightkube, httpx2, fleetwave.health.selectors
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

import httpx2
from lightkube import ApiError, Client
from lightkube.config.client_adapter import Client as _http_client
from lightkube.config.client_adapter import ConnectionParams
from lightkube.generic_resource import GenericGlobalResource, GenericNamespacedResource, create_api_info

from fleetwave.health import selectors

Obj = dict[str, Any]


class KindNotServed(LookupError):
    """The cluster does not serve this apiVersion/kind (CRD absent, typo in group/version/kind)."""


class ResourceReader(Protocol):
    def list(
        self, api_version: str, kind: str, *, namespace: str | None, label_selector: str | None
    ) -> list[Obj]: ...

    def get(self, api_version: str, kind: str, *, namespace: str | None, name: str) -> Obj | None: ...


def _meta(obj: Obj) -> dict[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


class DictResourceReader:
    """An in-memory cluster. Objects without `metadata.namespace` count as cluster-scoped."""

    def __init__(self, objects: Iterable[Obj]) -> None:
        self._objects = list(objects)

    def list(
        self, api_version: str, kind: str, *, namespace: str | None, label_selector: str | None
    ) -> list[Obj]:
        reqs = selectors.parse(label_selector)
        return [
            o
            for o in self._objects
            if o.get("apiVersion") == api_version
            and o.get("kind") == kind
            and (not namespace or _meta(o).get("namespace") in (None, "", namespace))
            and selectors.matches(reqs, _meta(o).get("labels"))
        ]

    def get(self, api_version: str, kind: str, *, namespace: str | None, name: str) -> Obj | None:
        for o in self.list(api_version, kind, namespace=namespace, label_selector=None):
            if _meta(o).get("name") == name:
                return o
        return None


@dataclass(frozen=True, slots=True)
class _Kind:
    plural: str
    namespaced: bool
    # A lightkube generic class generated at runtime; lightkube's overloads cannot type it.
    resource: Any


class KubeResourceReader:
    """A live cluster through a lightkube Client. Discovery results are cached per apiVersion;
    a "not served" answer is not cached, so a CRD installed later is found on the next call."""

    def __init__(self, client: Client) -> None:
        self._client = client
        self._kinds: dict[str, dict[str, _Kind]] = {}
        self._lock = threading.Lock()

    def list(
        self, api_version: str, kind: str, *, namespace: str | None, label_selector: str | None
    ) -> list[Obj]:
        k = self._kind(api_version, kind)
        # A list of pairs (lightkube accepts it) keeps repeated keys such as `a!=x,a!=y`.
        labels: Any = selectors.to_lightkube(selectors.parse(label_selector)) or None
        if k.namespaced:
            items = self._client.list(k.resource, namespace=namespace or "*", labels=labels)
        else:
            items = self._client.list(k.resource, labels=labels)
        return [_complete(dict(o), api_version, kind) for o in items]

    def get(self, api_version: str, kind: str, *, namespace: str | None, name: str) -> Obj | None:
        k = self._kind(api_version, kind)
        if k.namespaced and not namespace:
            raise ValueError(f"{kind} is namespaced: a namespace is needed to get {name!r}")
        try:
            if k.namespaced:
                obj = self._client.get(k.resource, name, namespace=namespace)
            else:
                obj = self._client.get(k.resource, name)
        except ApiError as e:
            if e.status.code == 404:
                return None
            raise
        return _complete(dict(obj), api_version, kind)

    def _kind(self, api_version: str, kind: str) -> _Kind:
        with self._lock:
            known = self._kinds.get(api_version)
        if known is None or kind not in known:
            known = self._discover(api_version)
            with self._lock:
                self._kinds[api_version] = known
        if kind not in known:
            raise KindNotServed(f"kind {kind} is not served under {api_version} by this cluster")
        return known[kind]

    def _discover(self, api_version: str) -> dict[str, _Kind]:
        group, _, version = api_version.rpartition("/")
        path = f"/apis/{api_version}" if group else f"/api/{version}"
        # lightkube has no discovery call; a short-lived HTTP client built from the same config
        # (server, TLS, auth) fetches the document. Results are cached, so this is rare.
        params = ConnectionParams(timeout=httpx2.Timeout(30.0, connect=10.0), trust_env=False)
        with _http_client(self._client.config, params) as http:
            resp = http.get(path)
        if resp.status_code == 404:
            return {}
        resp.raise_for_status()
        kinds: dict[str, _Kind] = {}
        for r in resp.json().get("resources", []):
            if "/" in r["name"]:  # subresources such as deployments/status
                continue
            kinds[r["kind"]] = _Kind(r["name"], bool(r["namespaced"]), _resource(group, version, r))
        return kinds


def _resource(
    group: str, version: str, r: dict[str, Any]
) -> type[GenericNamespacedResource] | type[GenericGlobalResource]:
    # Deliberately not registered in lightkube's global registry: registering would change what
    # `codecs.from_dict` returns for built-in kinds elsewhere in the process.
    base: type[GenericNamespacedResource] | type[GenericGlobalResource]
    base = GenericNamespacedResource if r["namespaced"] else GenericGlobalResource
    info = create_api_info(group, version, r["kind"], r["name"], verbs=["get", "list", "global_list"])
    return type(r["kind"], (base,), {"_api_info": info})


def _complete(obj: Obj, api_version: str, kind: str) -> Obj:
    # Items of a LIST response carry no apiVersion/kind; scripts and messages expect them.
    obj.setdefault("apiVersion", api_version)
    obj.setdefault("kind", kind)
    return obj

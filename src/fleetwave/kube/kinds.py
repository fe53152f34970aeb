"""Which resource (plural, scope) an apiVersion/kind is, and the resource class to use for it.

One resolver for every caller, in a sync and an async form sharing one cache policy:

1. fleetwave's own kinds (the API models) and kinds defined by CRDs in the content being delivered;
2. lightkube's table of built-in Kubernetes kinds;
3. the API server's discovery document of that one group/version (never a full-cluster scan).

Answers are remembered for the resolver's lifetime (one per client or member session). A kind that a
remembered document does not list is looked up again on the next call, so a CRD installed later is
found; "not served" is never cached. Every object is handled as a plain dict (generic resources), so
content round-trips verbatim.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from fleetwave.api import groups, models
from fleetwave.api.families import Family
from fleetwave.api.meta import API_VERSION
from fleetwave.kube import internals

GROUP, VERSION = API_VERSION.split("/")


class UnknownKind(LookupError):
    """The cluster does not serve this kind (no CRD installed, or a typo)."""


class GVK(NamedTuple):
    api_version: str
    kind: str

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def version(self) -> str:
        return self.api_version.rpartition("/")[2]

    def sveltos_form(self) -> str:
        """`Kind.version.group`, the form ClusterSummary `deployedGVKs` lists (core group empty)."""
        return f"{self.kind}.{self.version}.{self.group}"


@dataclass(frozen=True, slots=True)
class KindInfo:
    gvk: GVK
    plural: str
    namespaced: bool


@functools.cache
def resource_class(info: KindInfo) -> type[Any]:
    """The dict-in, dict-out resource class of `info` (typed Any: made at run time)."""
    return internals.generic_class(
        info.gvk.group, info.gvk.version, info.gvk.kind, info.plural, namespaced=info.namespaced
    )


def native_info(kind: str) -> KindInfo:
    """One of fleetwave's own kinds (e.g. "ClusterPromotion"); KeyError for unknown kinds."""
    model = models.KINDS[kind]
    return KindInfo(GVK(API_VERSION, kind), model.plural, model.namespaced)


@functools.cache
def resource(kind: str) -> Any:
    """The resource class of one of fleetwave's own kinds (registered with lightkube, with `.Status`);
    KeyError for unknown kinds."""
    info = native_info(kind)
    return internals.registered_class(GROUP, VERSION, kind, info.plural, namespaced=info.namespaced)


@functools.cache
def served_resource(api_version: str, kind: str, plural: str, namespaced: bool) -> Any:
    """The resource class of a kind fleetwave serves under another group (an upstream API family,
    see fleetwave.api.families), registered like the native ones."""
    group, _, version = api_version.rpartition("/")
    return internals.registered_class(group, version, kind, plural, namespaced=namespaced)


FLUX_SOURCE_API_VERSION = "source.toolkit.fluxcd.io/v1"
FLUX_SOURCE_PLURALS = {
    "GitRepository": "gitrepositories",
    "OCIRepository": "ocirepositories",
    "Bucket": "buckets",
}


def flux_source_resources() -> dict[str, Any]:
    """The resource classes of Flux's source kinds the controller reads content from (ADR 0103)."""
    group, _, version = FLUX_SOURCE_API_VERSION.rpartition("/")
    return {
        kind: internals.registered_class(group, version, kind, plural, namespaced=True)
        for kind, plural in FLUX_SOURCE_PLURALS.items()
    }


def capi_cluster_resources() -> tuple[Any, ...]:
    """Cluster API's `Cluster`, one class per version read, preferred first (ADR 0109): dict-in,
    dict-out and not registered with lightkube, as for any kind fleetwave reads but does not own."""
    return tuple(
        resource_class(
            KindInfo(GVK(f"{groups.CAPI_GROUP}/{version}", groups.CAPI_KIND), groups.CAPI_PLURAL, True)
        )
        for version in groups.CAPI_VERSIONS
    )


def family_resource(family: Family, kind: str) -> Any:
    """The resource class of native `kind` as `family` serves it (KeyError when it does not)."""
    served = family.served(kind)
    if family.native:
        return resource(kind)
    return served_resource(served.api_version, served.kind, served.plural, served.namespaced)


def builtin(gvk: GVK) -> KindInfo | None:
    """Kinds lightkube knows (every built-in Kubernetes kind), without asking the server."""
    found = internals.builtin_plural(gvk.api_version, gvk.kind)
    return None if found is None else KindInfo(gvk, found[0], found[1])


def builtin_resource(api_version: str, kind: str) -> Any:
    """lightkube's typed class of a built-in kind (e.g. apps/v1 Deployment: attribute access on
    what it reads); UnknownKind when lightkube does not know it."""
    found = internals.builtin_class(api_version, kind)
    if found is None:
        raise UnknownKind(f"{kind} in {api_version} is not a built-in Kubernetes kind")
    return found


def from_crds(objects: Iterable[Mapping[str, Any]]) -> dict[GVK, KindInfo]:
    """Kinds defined by CustomResourceDefinitions in a content set (pure)."""
    out: dict[GVK, KindInfo] = {}
    for obj in objects:
        if obj.get("kind") != "CustomResourceDefinition":
            continue
        spec = obj.get("spec") or {}
        names = spec.get("names") or {}
        for version in spec.get("versions") or []:
            gvk = GVK(f"{spec['group']}/{version['name']}", str(names["kind"]))
            out[gvk] = KindInfo(gvk, str(names["plural"]), spec.get("scope") != "Cluster")
    return out


def discovery_path(api_version: str) -> str:
    group, _, version = api_version.rpartition("/")
    return f"/apis/{api_version}" if group else f"/api/{version}"


def parse_discovery(api_version: str, document: Mapping[str, Any]) -> dict[GVK, KindInfo]:
    """The kinds a group/version discovery document lists (subresources such as pods/log left out)."""
    out: dict[GVK, KindInfo] = {}
    for r in document.get("resources") or []:
        name = str(r.get("name", ""))
        if "/" in name or not r.get("kind"):
            continue
        gvk = GVK(api_version, str(r["kind"]))
        out[gvk] = KindInfo(gvk, name, bool(r.get("namespaced")))
    return out


class _Table:
    """The shared cache policy: content CRDs and our kinds, then built-ins, then discovery."""

    def __init__(self, content: Iterable[Mapping[str, Any]]) -> None:
        self._known: dict[GVK, KindInfo] = from_crds(content)
        self.from_content: frozenset[GVK] = frozenset(self._known)
        self._lock = threading.Lock()

    def _cached(self, gvk: GVK) -> KindInfo | None:
        with self._lock:
            found = self._known.get(gvk)
        if found is not None:
            return found
        if gvk.api_version == API_VERSION and gvk.kind in models.KINDS:
            return native_info(gvk.kind)
        return builtin(gvk)

    def _learn(self, gvk: GVK, status: int, document: Callable[[], Mapping[str, Any]]) -> KindInfo | None:
        if status == 404:
            return None
        kinds = parse_discovery(gvk.api_version, document())
        with self._lock:
            self._known.update(kinds)
        return kinds.get(gvk)


class AsyncKinds(_Table):
    """The resolver for one async session (a member, or the management cluster)."""

    def __init__(self, client: Any, content: Iterable[Mapping[str, Any]] = ()) -> None:
        super().__init__(content)
        self._api = client

    async def find(self, gvk: GVK) -> KindInfo | None:
        found = self._cached(gvk)
        if found is not None:
            return found
        response = await internals.raw_http(self._api).get(discovery_path(gvk.api_version))
        if response.status_code != 404:
            response.raise_for_status()
        return self._learn(gvk, response.status_code, response.json)

    async def resolve(self, gvk: GVK) -> KindInfo:
        info = await self.find(gvk)
        if info is None:
            raise UnknownKind(f"the cluster does not serve {gvk.kind} in {gvk.api_version}")
        return info


class SyncKinds(_Table):
    """The resolver for one sync client (health checks run in worker threads)."""

    def __init__(self, client: Any, content: Iterable[Mapping[str, Any]] = ()) -> None:
        super().__init__(content)
        self._http = internals.raw_sync_http(client)

    def find(self, gvk: GVK) -> KindInfo | None:
        found = self._cached(gvk)
        if found is not None:
            return found
        return self.served(gvk)

    def served(self, gvk: GVK) -> KindInfo | None:
        """Asked of the server (discovery), never answered from what this process knows: a kind
        lightkube has a class for (an upstream group's, registered for reading) may not be served."""
        response = self._http.get(discovery_path(gvk.api_version), timeout=30.0)
        if response.status_code != 404:
            response.raise_for_status()
        return self._learn(gvk, response.status_code, response.json)

    def resolve(self, gvk: GVK) -> KindInfo:
        info = self.find(gvk)
        if info is None:
            raise UnknownKind(f"kind {gvk.kind} is not served under {gvk.api_version} by this cluster")
        return info


def served_kinds(client: Any, api_version: str) -> frozenset[str]:
    """The kinds the server lists under one group/version right now (discovery, which every
    authenticated user may read; empty when the group/version is not served)."""
    response = internals.raw_sync_http(client).get(discovery_path(api_version), timeout=30.0)
    if response.status_code == 404:
        return frozenset()
    response.raise_for_status()
    return frozenset(info.gvk.kind for info in parse_discovery(api_version, response.json()).values())


def register_all() -> None:
    """Make every native kind known to lightkube's codecs (idempotent)."""
    for kind in models.KINDS:
        resource(kind)

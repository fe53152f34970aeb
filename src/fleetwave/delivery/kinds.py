"""Map an (apiVersion, kind) to the lightkube resource class used to apply, list and delete it.

Every kind is handled as a plain dict (lightkube "generic" resource) so content round-trips
verbatim. Plural and scope come from lightkube's built-in table, from CRDs in the content set, or
from discovery of that one group/version; never from a full-cluster discovery scan.

may import: stdlib, lightkube, fleetwave.delivery.content
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from lightkube import AsyncClient
from lightkube.core import resource as lkres
from lightkube.core.exceptions import LoadResourceError
from lightkube.core.resource_registry import resource_registry
from lightkube.generic_resource import GenericGlobalResource, GenericNamespacedResource, create_api_info

from fleetwave.delivery.content import GVK


class UnknownKind(LookupError):
    """The member does not serve this kind (no CRD installed, or a typo)."""


@dataclass(frozen=True, slots=True)
class KindInfo:
    gvk: GVK
    plural: str
    namespaced: bool


def builtin(gvk: GVK) -> KindInfo | None:
    """Kinds lightkube knows (every built-in Kubernetes kind), without asking the server."""
    try:
        known = resource_registry.load(gvk.api_version, gvk.kind)
    except (LoadResourceError, ImportError):
        return None
    namespaced = issubclass(known, lkres.NamespacedResource)
    return KindInfo(gvk, known._api_info.plural, namespaced)


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


@functools.cache
def resource_class(info: KindInfo) -> type[Any]:
    """A lightkube resource class for `info`, deliberately left out of lightkube's global registry:
    the registry holds typed classes for built-ins, and we want dicts in and dicts out for all.
    Typed as Any: lightkube's overloads cannot describe a class made at run time."""
    base: type[GenericNamespacedResource] | type[GenericGlobalResource] = (
        GenericNamespacedResource if info.namespaced else GenericGlobalResource
    )
    api_info = create_api_info(info.gvk.group, info.gvk.version, info.gvk.kind, info.plural)
    return type(info.gvk.kind, (base,), {"_api_info": api_info})


async def _discover(client: AsyncClient, gvk: GVK) -> KindInfo | None:
    # lightkube has no public raw GET; its httpx client carries the member's address and credentials.
    http = client._client._client
    base = f"/apis/{gvk.api_version}" if gvk.group else f"/api/{gvk.api_version}"
    response = await http.get(base)
    if response.status_code == 404:
        return None
    response.raise_for_status()
    for resource in response.json().get("resources", []):
        if resource.get("kind") == gvk.kind and "/" not in resource.get("name", ""):
            return KindInfo(gvk, str(resource["name"]), bool(resource.get("namespaced")))
    return None


class Resolver:
    """Resolves kinds for one session with a member, remembering answers."""

    def __init__(self, client: AsyncClient, content: Iterable[Mapping[str, Any]] = ()) -> None:
        self._client = client
        self._known: dict[GVK, KindInfo] = from_crds(content)
        self.from_content: frozenset[GVK] = frozenset(self._known)

    async def find(self, gvk: GVK) -> KindInfo | None:
        if gvk not in self._known:
            info = builtin(gvk) or await _discover(self._client, gvk)
            if info is None:
                return None
            self._known[gvk] = info
        return self._known[gvk]

    async def resolve(self, gvk: GVK) -> KindInfo:
        info = await self.find(gvk)
        if info is None:
            raise UnknownKind(f"the member does not serve {gvk.kind} in {gvk.api_version}")
        return info

"""Apply manifests to the management cluster: fleetwave's own kinds (native or upstream apiVersions)
and plain Kubernetes objects, by server-side apply.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from fleetwave.api import codec, yamlsafe
from fleetwave.api.upstream import ConversionError
from fleetwave.kube import kinds, sync_ops
from fleetwave.kube.client import Client


@dataclass(frozen=True, slots=True)
class Applied:
    kind: str
    name: str
    namespace: str | None
    converted_from: str | None  # the upstream apiVersion a fleetwave kind was mapped from


def documents(text: str | bytes, *, source: str = "input") -> list[dict[str, Any]]:
    """The objects in a YAML stream, through the bounded loader (`yamlsafe.YamlError` otherwise)."""
    docs = [d for d in yamlsafe.load_all(text, what=source) if d]
    for i, d in enumerate(docs):
        if not isinstance(d, dict) or "kind" not in d or "apiVersion" not in d:
            problem = [("", "not a Kubernetes object (needs apiVersion and kind)")]
            raise codec.ManifestError("?", f"document-{i + 1}", problem)
    return docs


def is_fleetwave(doc: dict[str, Any]) -> bool:
    """Our own group, or an upstream Sveltos/KubeFleet group that maps onto it."""
    group = str(doc.get("apiVersion", "")).partition("/")[0]
    return (
        group == kinds.GROUP or group.endswith("projectsveltos.io") or group.endswith("kubernetes-fleet.io")
    )


def to_native(doc: dict[str, Any]) -> dict[str, Any]:
    """Validate and normalise one document; non-fleetwave objects pass through unchanged."""
    if not is_fleetwave(doc):
        return doc
    try:
        return codec.to_manifest(codec.parse_object(doc))
    except ConversionError as e:
        raise codec.ManifestError(str(doc.get("kind")), _name(doc), [("apiVersion", str(e))]) from e


@dataclass(frozen=True, slots=True)
class _Prepared:
    body: dict[str, Any]  # what is sent
    info: kinds.KindInfo  # where it goes
    original: dict[str, Any]


def apply(
    client: Client, docs: Iterable[dict[str, Any]], *, default_namespace: str | None = None
) -> list[Applied]:
    """Validate every document and find where it goes first (nothing is applied if one is invalid or
    not served), then apply in order. Any kind the cluster serves is applied, as kubectl does
    (discovery); a Sveltos or KubeFleet apiVersion goes to its upstream group when the cluster serves
    it (`install --upstream-apis`), else it is mapped to fleetwave's own group."""
    resolver = kinds.SyncKinds(client)
    prepared = [_prepare(resolver, doc) for doc in docs]
    result = []
    for item in prepared:
        body = item.body
        if default_namespace and item.info.namespaced and not body["metadata"].get("namespace"):
            body["metadata"]["namespace"] = default_namespace
        sync_ops.apply_as(client, kinds.resource_class(item.info), body)
        meta = body.get("metadata") or {}
        sent = str(body["apiVersion"])
        mapped = str(item.original["apiVersion"]) if item.original["apiVersion"] != sent else None
        result.append(Applied(str(body["kind"]), str(meta.get("name")), meta.get("namespace"), mapped))
    return result


def _prepare(resolver: kinds.SyncKinds, doc: dict[str, Any]) -> _Prepared:
    native = to_native(doc)  # validates fleetwave's kinds in either form; other kinds pass through
    if is_fleetwave(doc) and str(doc["apiVersion"]).partition("/")[0] != kinds.GROUP:
        upstream = resolver.served(kinds.GVK(str(doc["apiVersion"]), str(doc["kind"])))
        if upstream is not None:  # served in its own group: written there, as the user wrote it
            return _Prepared(_with_metadata(doc), upstream, doc)
    gvk = kinds.GVK(str(native["apiVersion"]), str(native["kind"]))
    info = resolver.find(gvk)
    if info is None:
        problem = f"the cluster does not serve {gvk.kind} in {gvk.api_version} (is its CRD installed?)"
        raise codec.ManifestError(gvk.kind, _name(native), [("apiVersion", problem)])
    return _Prepared(_with_metadata(native), info, doc)


def _with_metadata(doc: dict[str, Any]) -> dict[str, Any]:
    """A copy whose metadata may take a default namespace without changing the input."""
    return {**doc, "metadata": dict(doc.get("metadata") or {})}


def _name(doc: dict[str, Any]) -> str:
    return str((doc.get("metadata") or {}).get("name", "?"))

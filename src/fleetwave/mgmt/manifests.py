"""Apply manifests to the management cluster: fleetwave's own kinds (native or upstream apiVersions)
and plain Kubernetes objects, by server-side apply.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from fleetwave.api import codec, models, yamlsafe
from fleetwave.api.upstream import ConversionError
from fleetwave.kube import kinds, ops, sync_ops
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


def apply(
    client: Client, docs: Iterable[dict[str, Any]], *, default_namespace: str | None = None
) -> list[Applied]:
    """Validate every document first (nothing is applied if one is invalid), then apply in order."""
    prepared = [(doc, to_native(doc)) for doc in docs]
    for _, native in prepared:
        if default_namespace and _namespaced(native) and not native["metadata"].get("namespace"):
            native["metadata"]["namespace"] = default_namespace
        try:
            ops.to_resource(native)  # a kind lightkube cannot send fails here, before anything is applied
        except kinds.UnknownKind as e:
            raise codec.ManifestError(
                str(native.get("kind")),
                _name(native),
                [
                    (
                        "apiVersion",
                        f"unknown kind {native.get('apiVersion')}/{native.get('kind')} (CRD installed?)",
                    )
                ],
            ) from e
    result = []
    for original, native in prepared:
        sync_ops.apply(client, native)
        meta = original.get("metadata") or {}
        mapped = is_fleetwave(original) and not str(original["apiVersion"]).startswith(kinds.GROUP)
        upstream = original["apiVersion"] if mapped else None
        result.append(Applied(str(native["kind"]), str(meta.get("name")), meta.get("namespace"), upstream))
    return result


def _namespaced(doc: dict[str, Any]) -> bool:
    model = models.KINDS.get(doc["kind"]) if str(doc.get("apiVersion", "")).startswith(kinds.GROUP) else None
    if model is not None:
        return model.namespaced
    return doc["kind"] not in _CLUSTER_SCOPED_BUILTINS


_CLUSTER_SCOPED_BUILTINS = frozenset(
    {
        "Namespace",
        "ClusterRole",
        "ClusterRoleBinding",
        "CustomResourceDefinition",
        "Node",
        "PersistentVolume",
        "StorageClass",
        "PriorityClass",
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
        "APIService",
        "IngressClass",
        "RuntimeClass",
        "CSIDriver",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    }
)


def _name(doc: dict[str, Any]) -> str:
    return str((doc.get("metadata") or {}).get("name", "?"))

"""Pure helpers for content sets: identities, stable hashes, inventory keys, apply order, parsing.

Nothing here performs I/O; `manifests` and `helm` build on these to talk to a member cluster.
"""

from __future__ import annotations

import base64
import binascii
import copy
import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from fleetwave.kube.kinds import GVK

INVENTORY_LABEL = "fleetwave.io/inventory"
_LABEL_VALUE = re.compile(r"^(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)$")
_LABEL_UNSAFE = re.compile(r"[^-A-Za-z0-9_.]+")
_HASH_CHARS = 16

# Apply waves, close to Helm's install order: what others depend on goes first. Unknown kinds
# (custom resources) go last so their CRDs exist by then.
_WAVES: tuple[frozenset[str], ...] = (
    frozenset({"CustomResourceDefinition", "Namespace"}),
    frozenset(
        {
            "PriorityClass",
            "ResourceQuota",
            "LimitRange",
            "NetworkPolicy",
            "ServiceAccount",
            "Secret",
            "ConfigMap",
            "StorageClass",
            "PersistentVolume",
            "PersistentVolumeClaim",
        }
    ),
    frozenset({"ClusterRole", "Role"}),
    frozenset({"ClusterRoleBinding", "RoleBinding"}),
    frozenset(
        {
            "Service",
            "Pod",
            "ReplicaSet",
            "Deployment",
            "StatefulSet",
            "DaemonSet",
            "Job",
            "CronJob",
            "HorizontalPodAutoscaler",
            "PodDisruptionBudget",
            "Ingress",
        }
    ),
    frozenset({"APIService", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"}),
)
# Server-populated metadata that says nothing about the content itself.
_VOLATILE_METADATA = (
    "resourceVersion",
    "managedFields",
    "generation",
    "creationTimestamp",
    "uid",
    "selfLink",
)


class ContentError(ValueError):
    """Content that cannot be delivered as written (bad YAML, not a Kubernetes object, bad base64)."""


@dataclass(frozen=True, slots=True, order=True)
class ObjectRef:
    """One object on a member. `namespace` is None for cluster-scoped objects."""

    api_version: str
    kind: str
    namespace: str | None
    name: str

    @property
    def gvk(self) -> GVK:
        return GVK(self.api_version, self.kind)

    @property
    def identity(self) -> tuple[str, str, str, str]:
        """What names the object regardless of the API version it was served under."""
        return (self.gvk.group, self.kind, self.namespace or "", self.name)

    def __str__(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind}.{self.gvk.group or 'core'} {where}{self.name}"


def ref_of(obj: Mapping[str, Any]) -> ObjectRef:
    """The reference an object names itself by (namespace as written, not yet defaulted)."""
    meta = obj.get("metadata") or {}
    return ObjectRef(
        str(obj["apiVersion"]), str(obj["kind"]), meta.get("namespace") or None, str(meta["name"])
    )


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def _digest(text: str) -> str:
    # Base64 of SHA-256, the form Sveltos uses for ClusterSummary hashes.
    return base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()


def object_hash(obj: Mapping[str, Any]) -> str:
    return _digest(canonical_json(obj))


def content_hash(objects: Iterable[Mapping[str, Any]]) -> str:
    """Hash of a set of objects: independent of key order within objects and of object order."""
    parts = sorted(canonical_json([list(ref_of(o).identity), object_hash(o)]) for o in objects)
    return _digest("\n".join(parts))


def values_hash(values: Mapping[str, Any]) -> str:
    return _digest(canonical_json(values))


def inventory_key(owner: str) -> str:
    """A label value naming the inventory of `owner`: kept verbatim when it already fits a label
    value, otherwise a readable prefix plus a short hash of the full string (so distinct owners
    never collide after truncation)."""
    if _LABEL_VALUE.fullmatch(owner):
        return owner
    digest = hashlib.sha256(owner.encode()).hexdigest()[:_HASH_CHARS]
    prefix = _LABEL_UNSAFE.sub("-", owner).strip("-_.")[: 63 - _HASH_CHARS - 1].rstrip("-_.")
    return f"{prefix}-{digest}" if prefix else f"fw-{digest}"


def apply_wave(kind: str) -> int:
    for index, kinds in enumerate(_WAVES):
        if kind in kinds:
            return index
    return len(_WAVES)


def sort_for_apply(objects: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Dependency order; stable, so the author's order holds within a wave."""
    return sorted(objects, key=lambda o: apply_wave(str(o.get("kind", ""))))


def with_inventory(obj: Mapping[str, Any], key: str) -> dict[str, Any]:
    """A deep copy of `obj` carrying the inventory label."""
    out = copy.deepcopy(dict(obj))
    meta = out.setdefault("metadata", {})
    meta["labels"] = {**(meta.get("labels") or {}), INVENTORY_LABEL: key}
    return out


def comparable(obj: Mapping[str, Any]) -> dict[str, Any]:
    """`obj` without status and server bookkeeping, for "would this change anything" comparisons."""
    out = {k: v for k, v in obj.items() if k != "status"}
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in _VOLATILE_METADATA}
    out["metadata"] = meta
    return out


def diff_paths(left: Any, right: Any, path: str = "") -> list[str]:
    """JSON-pointer-like paths where two documents differ (for human-readable drift messages)."""
    if isinstance(left, Mapping) and isinstance(right, Mapping):
        out: list[str] = []
        for key in sorted(set(left) | set(right), key=str):
            out += diff_paths(left.get(key), right.get(key), f"{path}/{key}")
        return out
    if isinstance(left, list) and isinstance(right, list) and len(left) == len(right):
        return [
            p
            for i, (a, b) in enumerate(zip(left, right, strict=True))
            for p in diff_paths(a, b, f"{path}/{i}")
        ]
    return [] if left == right else [path or "/"]


def _documents(text: str, source: str) -> list[dict[str, Any]]:
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as err:
        raise ContentError(f"{source}: not valid YAML: {err}") from err
    out: list[dict[str, Any]] = []
    for doc in docs:
        if isinstance(doc, dict) and doc.get("kind") == "List" and isinstance(doc.get("items"), list):
            docs.extend(doc["items"])  # a v1 List is a container, not something to apply
            continue
        if not isinstance(doc, dict) or not doc.get("apiVersion") or not doc.get("kind"):
            raise ContentError(
                f"{source}: every document must be a Kubernetes object with apiVersion and kind"
            )
        if not (doc.get("metadata") or {}).get("name"):
            raise ContentError(f"{source}: {doc['kind']} without metadata.name")
        out.append(doc)
    return out


def parse_policy_data(
    data: Mapping[str, str], *, base64_encoded: bool, source: str = ""
) -> list[dict[str, Any]]:
    """Objects held in a ConfigMap's or Secret's data (Sveltos policyRefs): each key holds one or
    more YAML/JSON documents; Secret data is base64. Keys are read in sorted order (stable output)."""
    objects: list[dict[str, Any]] = []
    for key in sorted(data):
        text = data[key]
        if base64_encoded:
            try:
                text = base64.b64decode(text, validate=True).decode()
            except (binascii.Error, UnicodeDecodeError) as err:
                raise ContentError(f"{source}[{key}]: not base64-encoded UTF-8 text") from err
        objects += _documents(text, f"{source}[{key}]")
    return objects

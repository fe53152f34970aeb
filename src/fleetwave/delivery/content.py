"""Pure helpers for content sets: identities, stable hashes, inventory keys, apply order, parsing.

Nothing here performs I/O; `manifests` and `helm` build on these to talk to a member cluster.
"""

from __future__ import annotations

import base64
import binascii
import collections
import contextlib
import copy
import hashlib
import json
import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fleetwave.api import yamlsafe
from fleetwave.kube.kinds import GVK

INVENTORY_LABEL = "fleetwave.io/inventory"
_LABEL_VALUE = re.compile(r"^(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)$")
_LABEL_UNSAFE = re.compile(r"[^-A-Za-z0-9_.]+")
_HASH_CHARS = 16
# `kind: List` is a container: its items are expanded, Lists inside Lists too, but only this deep and
# only up to this many objects per source (the YAML loader already bounds size, depth and aliases).
MAX_LIST_DEPTH = 8
MAX_OBJECTS = 10_000
_WHERE = re.compile(r"line \d+, column \d+")

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


def version_number(obj: Mapping[str, Any]) -> int | None:
    """The resourceVersion as the integer KEP-5504 (Kubernetes 1.35) makes comparable between
    versions of one object; None when it is not one."""
    text = str((obj.get("metadata") or {}).get("resourceVersion") or "")
    if not text.isdigit() or text.startswith("0"):
        return None
    return int(text)


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


def yaml_error(err: yamlsafe.YamlError, source: str, *, redact: bool) -> ContentError:
    """A YAML problem as a ContentError naming the source. With `redact` (Secret data) only the line
    and column are kept: a parser's message may quote the input (an alias, a tag, a character)."""
    detail = str(err).removeprefix(f"{source}: ")
    if redact:
        where = _WHERE.search(detail)
        detail = f"invalid YAML at {where.group(0)}" if where else "refused by the YAML loader"
    return ContentError(f"{source}: not valid YAML ({detail})")


def load_yaml_map(text: str, source: str, *, redact: bool) -> dict[str, Any]:
    """One YAML mapping (Helm values), read with the bounded loader; empty text is {}. Remembered
    like documents (`_remembered`): values read at every reconcile are parsed once per text."""
    return _remembered(_VALUES, text, source, redact, _parse_yaml_map)[0]


def _parse_yaml_map(text: str, source: str, *, redact: bool) -> list[dict[str, Any]]:
    return [_yaml_map_now(text, source, redact=redact)]


def _yaml_map_now(text: str, source: str, *, redact: bool) -> dict[str, Any]:
    try:
        parsed = yamlsafe.load(text, what=source)
    except yamlsafe.YamlError as err:
        raise yaml_error(err, source, redact=redact) from None
    if parsed is None:
        return {}
    if not isinstance(parsed, dict):
        raise ContentError(f"{source}: values must be a YAML mapping")
    return parsed


class _ParsedCache:
    """Documents already parsed, by a digest of their text: a rollout re-reads the same policy
    ConfigMap on every pass, and parsing YAML in Python is the costliest step of that read. Bounded
    by the total size of the texts it remembers (least recently used go first); callers get copies,
    so nothing they change leaks into a later read."""

    def __init__(self, max_bytes: int = 32 * 1024 * 1024) -> None:
        self.max_bytes = max_bytes
        self._held = 0
        self._entries: collections.OrderedDict[str, tuple[int, list[dict[str, Any]]]] = (
            collections.OrderedDict()
        )
        self._lock = threading.Lock()  # the CLI and tests call in from more than one thread

    def get(self, key: str) -> list[dict[str, Any]] | None:
        with self._lock:
            found = self._entries.get(key)
            if found is None:
                return None
            self._entries.move_to_end(key)
        return copy.deepcopy(found[1])

    def holds(self, key: str) -> bool:
        with self._lock:
            return key in self._entries

    def put(self, key: str, size: int, parsed: list[dict[str, Any]]) -> None:
        kept = copy.deepcopy(parsed)
        with self._lock:
            if size > self.max_bytes or key in self._entries:
                return
            self._entries[key] = (size, kept)
            self._held += size
            while self._held > self.max_bytes:
                _key, (dropped, _) = self._entries.popitem(last=False)
                self._held -= dropped


_PARSED = _ParsedCache()


# Texts that failed, by digest, source and redaction (the message names the source): a refused
# megabyte is parsed once, not again at every reconcile of every rollout that reads it.
_FAILED: collections.OrderedDict[tuple[str, str, bool], str] = collections.OrderedDict()
_FAILED_KEPT = 1024
_FAILED_LOCK = threading.Lock()
_VALUES = _ParsedCache(max_bytes=8 * 1024 * 1024)  # Helm values maps, each kept as a list of one

_Parse = Callable[..., list[dict[str, Any]]]


def _documents(text: str, source: str, *, redact: bool = False) -> list[dict[str, Any]]:
    return _remembered(_PARSED, text, source, redact, _parse_documents)


def _remembered(
    cache: _ParsedCache, text: str, source: str, redact: bool, parse: _Parse
) -> list[dict[str, Any]]:
    key = hashlib.sha256(text.encode()).hexdigest()
    cached = cache.get(key)
    if cached is not None:
        return cached
    with _FAILED_LOCK:
        failed = _FAILED.get((key, source, redact))
    if failed is not None:
        raise ContentError(failed)
    try:
        parsed: list[dict[str, Any]] = parse(text, source, redact=redact)
    except ContentError as err:
        with _FAILED_LOCK:
            _FAILED[(key, source, redact)] = str(err)
            while len(_FAILED) > _FAILED_KEPT:
                _FAILED.popitem(last=False)
        raise
    cache.put(key, len(text), parsed)
    return parsed


def _parse_documents(text: str, source: str, *, redact: bool) -> list[dict[str, Any]]:
    try:
        docs = yamlsafe.load_all(text, what=source)
    except yamlsafe.YamlError as err:
        raise yaml_error(err, source, redact=redact) from None
    out: list[dict[str, Any]] = []
    for doc in docs:
        if doc is not None:
            out += _expand(doc, source, redact=redact)
        if len(out) > MAX_OBJECTS:
            raise ContentError(f"{source}: more than {MAX_OBJECTS} objects")
    return out


def _expand(doc: Any, source: str, *, redact: bool) -> list[dict[str, Any]]:
    """The objects one document stands for: itself, or the items of a (nested) v1 List, in order.
    Iterative, bounded in depth and count, and refusing a List that contains itself."""
    out: list[dict[str, Any]] = []
    stack: list[tuple[Any, int, frozenset[int]]] = [(doc, 0, frozenset())]
    while stack:
        item, depth, inside = stack.pop()
        if isinstance(item, dict) and item.get("kind") == "List" and isinstance(item.get("items"), list):
            if id(item) in inside:
                raise ContentError(f"{source}: a List contains itself")
            if depth >= MAX_LIST_DEPTH:
                raise ContentError(f"{source}: Lists nested deeper than {MAX_LIST_DEPTH} levels")
            if len(item["items"]) > MAX_OBJECTS:
                raise ContentError(f"{source}: more than {MAX_OBJECTS} objects")
            nested = inside | {id(item)}
            stack.extend((child, depth + 1, nested) for child in reversed(item["items"]))
            continue
        out.append(_object(item, source, redact=redact))
        if len(out) > MAX_OBJECTS:
            raise ContentError(f"{source}: more than {MAX_OBJECTS} objects")
    return out


def _object(doc: Any, source: str, *, redact: bool) -> dict[str, Any]:
    if not isinstance(doc, dict) or not doc.get("apiVersion") or not doc.get("kind"):
        raise ContentError(f"{source}: every document must be a Kubernetes object with apiVersion and kind")
    if not isinstance(doc.get("metadata") or {}, dict) or not (doc.get("metadata") or {}).get("name"):
        what = "an object" if redact else str(doc["kind"])[:63]
        raise ContentError(f"{source}: {what} without metadata.name")
    return doc


def parse_policy_data(
    data: Mapping[str, str], *, base64_encoded: bool, source: str = "", redact: bool | None = None
) -> list[dict[str, Any]]:
    """Objects held in a ConfigMap's or Secret's data (Sveltos policyRefs): each key holds one or
    more YAML/JSON documents; Secret data is base64. Keys are read in sorted order (stable output).

    Secret data is never quoted in an error (`redact`, on by default for base64 data): YAML problems
    give line and column only."""
    hide = base64_encoded if redact is None else redact
    objects: list[dict[str, Any]] = []
    for key in sorted(data):
        objects += _documents(
            decode(data[key], f"{source}[{key}]", base64_encoded), f"{source}[{key}]", redact=hide
        )
        if len(objects) > MAX_OBJECTS:
            raise ContentError(f"{source}: more than {MAX_OBJECTS} objects")
    return objects


def decoded_or_none(value: Any, base64_encoded: bool, *, at_least: int = 0) -> str | None:
    """`decode` for a look ahead: None where `decode` would refuse (the resolve reports it), and
    for a value shorter than `at_least` (its base64 is never shorter than its text)."""
    if not isinstance(value, str) or len(value) < at_least:
        return None
    try:
        return decode(value, "", base64_encoded)
    except ContentError:
        return None


# A text to parse ahead: (text, source, redact, what), `what` being "documents" (policy content)
# or "values" (a Helm values map).
Ahead = tuple[str, str, bool, str]


def unparsed(texts: Sequence[Ahead]) -> list[Ahead]:
    """The texts not remembered yet, parsed or failed."""
    out = []
    for text, source, redact, what in texts:
        key = hashlib.sha256(text.encode()).hexdigest()
        with _FAILED_LOCK:
            failed = (key, source, redact) in _FAILED
        cache = _VALUES if what == "values" else _PARSED
        if not failed and not cache.holds(key):
            out.append((text, source, redact, what))
    return out


def parse_ahead(texts: Sequence[Ahead]) -> None:
    """Parse texts into the memo the resolve reads (parsed or failed), in the calling thread: the
    controller runs this in a worker thread before the resolve that needs them, so a large
    ConfigMap is never parsed on the event loop."""
    for text, source, redact, what in texts:
        with contextlib.suppress(ContentError):
            if what == "values":
                load_yaml_map(text, source, redact=redact)
            else:
                _documents(text, source, redact=redact)


def decode(value: Any, source: str, base64_encoded: bool) -> str:
    """A data value as text: Secret data is base64 of UTF-8 text; anything else is refused by name."""
    if not isinstance(value, str):
        raise ContentError(f"{source}: not text")
    if not base64_encoded:
        return value
    try:
        return base64.b64decode(value, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise ContentError(f"{source}: not base64-encoded UTF-8 text") from None


MAX_ARCHIVE_BYTES = 4 * 1024 * 1024  # more than any ConfigMap or Secret can hold


def archive_bytes(value: Any, source: str) -> bytes:
    """A binary value (ConfigMap binaryData, Secret data) as bytes: base64, bounded."""
    if not isinstance(value, str) or len(value) > MAX_ARCHIVE_BYTES * 4 // 3 + 4:
        raise ContentError(f"{source}: the archive is not base64 text of at most {MAX_ARCHIVE_BYTES} bytes")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise ContentError(f"{source}: the archive is not base64-encoded") from None

"""Per-cluster overrides (KubeFleet's ClusterResourceOverride and ResourceOverride), pure.

Given the overrides that may touch a placement's objects, one member cluster (name and labels) and
the selected objects, `render` returns the objects as that cluster gets them: JSON patches applied
(RFC 6902 add/remove/replace, with `${MEMBER-CLUSTER-NAME}` and `${MEMBER-CLUSTER-LABEL-KEY-<key>}`
filled in), objects a Delete rule matches left out. Upstream's order: cluster overrides first, then
resource overrides (the namespaced ones win a conflict), each kind by name. A failure names the
override, rule, patch and object, and nothing of that cluster's content is returned.

Selection is upstream's: a ClusterResourceOverride selects a cluster-scoped object by group,
version, kind and name, and every object of a Namespace it selects; a ResourceOverride selects an
object of its own namespace. A rule applies to a cluster its selector matches (no selector: none;
no terms: all).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import jsonpatch
import jsonpointer

from fleetwave.core import model as m
from fleetwave.core import selectors

NAME_VARIABLE = "${MEMBER-CLUSTER-NAME}"
LABEL_VARIABLE = "${MEMBER-CLUSTER-LABEL-KEY-"
OPS = frozenset({"add", "remove", "replace"})


@dataclass(frozen=True, slots=True)
class Target:
    """What an override selects: group, version, kind, name (and the namespace for a resource override)."""

    group: str
    version: str
    kind: str
    name: str
    namespace: str | None = None


@dataclass(frozen=True, slots=True)
class Patch:
    op: str
    path: str
    value: Any = None  # None: absent (remove)


@dataclass(frozen=True, slots=True)
class Rule:
    clusters: tuple[m.Selector | None, ...] | None  # None: no cluster; (): every cluster; terms ORed
    delete: bool = False
    patches: tuple[Patch, ...] = ()


@dataclass(frozen=True, slots=True)
class PlacementRef:
    name: str
    scope: str = "Cluster"  # Cluster | Namespaced


@dataclass(frozen=True, slots=True)
class Override:
    """One override as snapshotted: `name` is the snapshot's (what status lists), `namespace` is
    None for a ClusterResourceOverride."""

    name: str
    namespace: str | None
    digest: str
    targets: tuple[Target, ...]
    rules: tuple[Rule, ...]
    placement: PlacementRef | None = None

    @property
    def label(self) -> str:
        if self.namespace is None:
            return f"ClusterResourceOverride snapshot {self.name}"
        return f"ResourceOverride snapshot {self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class Member:
    name: str  # the MemberCluster's name: ${MEMBER-CLUSTER-NAME}
    labels: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class Rendered:
    objects: tuple[dict[str, Any], ...]
    cluster_overrides: tuple[str, ...] = ()  # applicable ClusterResourceOverride snapshot names
    resource_overrides: tuple[tuple[str, str], ...] = ()  # (namespace, name) of ResourceOverride snapshots


class OverrideError(ValueError):
    """An override that cannot be applied; the message says which, where and why."""


# --- selection --------------------------------------------------------------------------------------


def _identity(obj: Mapping[str, Any]) -> tuple[str, str, str, str, str | None]:
    group, _, version = str(obj.get("apiVersion") or "").rpartition("/")
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace") or None
    return group, version, str(obj.get("kind") or ""), str(meta.get("name") or ""), namespace


def cluster_key(obj: Mapping[str, Any]) -> Target:
    """The target a ClusterResourceOverride must name to reach `obj`: itself, or its Namespace."""
    group, version, kind, name, namespace = _identity(obj)
    if namespace is None:
        return Target(group, version, kind, name)
    return Target("", "v1", "Namespace", namespace)


def resource_key(obj: Mapping[str, Any]) -> Target | None:
    """The target a ResourceOverride must name to reach `obj` (None: cluster-scoped, none can)."""
    group, version, kind, name, namespace = _identity(obj)
    return None if namespace is None else Target(group, version, kind, name, namespace)


def _selects(override: Override, obj: Mapping[str, Any]) -> bool:
    if override.namespace is None:
        return cluster_key(obj) in override.targets
    key = resource_key(obj)
    return key is not None and key.namespace == override.namespace and key in override.targets


def for_placement(
    overrides: Iterable[Override],
    objects: Sequence[Mapping[str, Any]],
    placement: str,
    namespace: str | None,
) -> tuple[Override, ...]:
    """The overrides that may touch a placement's objects: aimed at it (or at no placement) and
    selecting at least one of them; cluster overrides first, each kind by name."""
    out = [
        o
        for o in overrides
        if _aimed_at(o, placement, namespace) and any(_selects(o, obj) for obj in objects)
    ]
    return tuple(sorted(out, key=_order))


def _order(o: Override) -> tuple[int, str, str]:
    return (0 if o.namespace is None else 1, o.namespace or "", o.name)


def _aimed_at(o: Override, placement: str, namespace: str | None) -> bool:
    ref = o.placement
    if ref is None:
        return True
    if ref.name != placement:
        return False
    if ref.scope == "Namespaced":  # a ResourcePlacement of the override's own namespace
        return o.namespace is not None and namespace == o.namespace
    return namespace is None


def rule_matches(rule: Rule, member: Member) -> bool:
    if rule.clusters is None:
        return False
    if not rule.clusters:
        return True
    return any(selectors.matches(term, member.labels) for term in rule.clusters)


def applicable(overrides: Iterable[Override], member: Member) -> tuple[Override, ...]:
    """The overrides with at least one rule for this cluster (what its status lists)."""
    return tuple(o for o in overrides if any(rule_matches(r, member) for r in o.rules))


def digest(content_hash: str, overrides: Iterable[Override], member: Member) -> str:
    """What one cluster gets, as a hash: the content's own when no override applies there."""
    mine = applicable(overrides, member)
    if not mine:
        return content_hash
    parts = {
        "content": content_hash,
        "overrides": [[o.namespace or "", o.name, o.digest] for o in mine],
        "cluster": member.name,
        "labels": dict(sorted(member.labels.items())),
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def revision(content_hash: str, overrides: Iterable[Override]) -> str:
    """A placement's revision: its content's hash, folded with every override that may touch it."""
    listed = [[o.namespace or "", o.name, o.digest] for o in overrides]
    if not listed:
        return content_hash
    return hashlib.sha256(json.dumps([content_hash, listed]).encode()).hexdigest()


# --- rendering --------------------------------------------------------------------------------------


def render(overrides: Sequence[Override], member: Member, objects: Sequence[Mapping[str, Any]]) -> Rendered:
    """The objects as `member` gets them; raises OverrideError (nothing is half-rendered)."""
    mine = applicable(overrides, member)
    out: list[dict[str, Any]] = []
    for obj in objects:
        rendered = _render_one(mine, member, obj)
        if rendered is not None:
            out.append(rendered)
    return Rendered(
        tuple(out),
        tuple(o.name for o in mine if o.namespace is None),
        tuple((o.namespace, o.name) for o in mine if o.namespace is not None),
    )


def _render_one(mine: Sequence[Override], member: Member, obj: Mapping[str, Any]) -> dict[str, Any] | None:
    cluster_side = [o for o in mine if o.namespace is None and _selects(o, obj)]
    resource_side = [o for o in mine if o.namespace is not None and _selects(o, obj)]
    for side in (cluster_side, resource_side):
        if len(side) > 1:
            names = " and ".join(o.label for o in side)
            raise OverrideError(f"{_describe(obj)} is selected by both {names}; at most one may select it")
    doc: dict[str, Any] | None = json.loads(json.dumps(obj))  # a deep copy the patches may edit
    for o in (*cluster_side, *resource_side):
        if doc is None:
            break
        doc = _apply_rules(o, member, doc)
    return doc


def _apply_rules(o: Override, member: Member, doc: dict[str, Any]) -> dict[str, Any] | None:
    before = _identity(doc)
    for r, rule in enumerate(o.rules):
        if not rule_matches(rule, member):
            continue
        if rule.delete:
            return None
        for p, patch in enumerate(rule.patches):
            where = f"{o.label}, rule {r}, patch {p} ({patch.op} {patch.path}) on {_describe(doc)}"
            doc = _patched(doc, patch, member, where)
    if _identity(doc) != before:
        raise OverrideError(f"{o.label} changed the identity of {_describe(doc)}")
    return doc


def _patched(doc: dict[str, Any], patch: Patch, member: Member, where: str) -> dict[str, Any]:
    if patch.op not in OPS:
        raise OverrideError(f"{where}: op must be add, remove or replace")
    op: dict[str, Any] = {"op": patch.op, "path": patch.path}
    if patch.op != "remove":
        op["value"] = _fill(patch.value, member, where)
    try:
        result = jsonpatch.JsonPatch([op]).apply(doc)
    except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as e:
        raise OverrideError(f"{where}: {e}") from e
    except (TypeError, ValueError, KeyError, IndexError) as e:  # malformed paths the library trips on
        raise OverrideError(f"{where}: {type(e).__name__}: {e}") from e
    if not isinstance(result, dict):
        raise OverrideError(f"{where}: the object is no longer an object")
    return result


def _fill(value: Any, member: Member, where: str) -> Any:
    """The value with the cluster's variables filled in, in every string (keys too)."""
    if isinstance(value, str):
        return _fill_text(value, member, where)
    if isinstance(value, list):
        return [_fill(v, member, where) for v in value]
    if isinstance(value, dict):
        return {_fill_text(str(k), member, where): _fill(v, member, where) for k, v in value.items()}
    return value


def _fill_text(text: str, member: Member, where: str) -> str:
    text = text.replace(NAME_VARIABLE, member.name)
    pos = 0  # past what was filled in: a label's value is never read as a variable
    while (start := text.find(LABEL_VARIABLE, pos)) != -1:
        begin = start + len(LABEL_VARIABLE)
        end = text.find("}", begin)
        if end == -1:
            raise OverrideError(f"{where}: {LABEL_VARIABLE}... is missing its closing }}")
        key = text[begin:end]
        if key not in member.labels:
            raise OverrideError(f"{where}: cluster {member.name} has no label {key}")
        value = member.labels[key]
        text = text[:start] + value + text[end + 1 :]
        pos = start + len(value)
    return text


def _describe(obj: Mapping[str, Any]) -> str:
    _, _, kind, name, namespace = _identity(obj)
    return f'{kind or "object"} "{namespace}/{name}"' if namespace else f'{kind or "object"} "{name}"'

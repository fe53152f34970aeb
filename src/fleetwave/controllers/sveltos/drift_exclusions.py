"""A profile's `driftExclusions`: fields fleetwave neither sets nor watches (pure).

As in Sveltos, each excluded path is removed from the matching objects before they are delivered, so
server-side apply never owns it: another controller (an autoscaler changing `/spec/replicas`) may set
it, and drift detection, which compares only what fleetwave applied, ignores it.

Paths are JSON pointers (`/spec/replicas`, `/spec/template/spec/containers/0/image`, `~1` for `/`).
A target matches by exact group, version, kind, name and namespace; Sveltos treats name and
namespace as regular expressions and also accepts label and annotation selectors: patterns other
than literal names and the two selectors are refused by name until they are supported.
Exclusions apply to policyRefs content; together with helmCharts they are refused (charts would
keep the fields).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable
from typing import Any

from fleetwave.api.sveltos import DriftExclusion, PatchSelector

_LITERAL = re.compile(r"^[A-Za-z0-9._-]*$")
MAX_PATHS = 100


class DriftExclusionError(ValueError):
    pass


def check(exclusions: Iterable[DriftExclusion], path: str) -> None:
    for i, ex in enumerate(exclusions):
        where = f"{path}.driftExclusions[{i}]"
        if not ex.paths or len(ex.paths) > MAX_PATHS:
            raise DriftExclusionError(f"{where}.paths: between 1 and {MAX_PATHS} JSON pointers")
        for j, pointer in enumerate(ex.paths):
            if not pointer.startswith("/") or len(pointer) > 1024:
                raise DriftExclusionError(f"{where}.paths[{j}]: not a JSON pointer (it starts with '/')")
        target = ex.target
        if target is None:
            continue
        for name in ("label_selector", "annotation_selector"):
            if getattr(target, name):
                alias = PatchSelector.model_fields[name].alias or name
                raise DriftExclusionError(f"{where}.target.{alias}: not supported by fleetwave yet")
        for name in ("name", "namespace"):
            value = getattr(target, name)
            if value and not _LITERAL.match(value):
                raise DriftExclusionError(
                    f"{where}.target.{name}: only a literal name is supported by fleetwave yet"
                )


def _matches(target: PatchSelector | None, obj: dict[str, Any]) -> bool:
    if target is None:
        return True
    group, _, version = str(obj.get("apiVersion", "")).rpartition("/")
    meta = obj.get("metadata") or {}
    pairs = [
        (target.group, group),
        (target.version, version),
        (target.kind, obj.get("kind")),
        (target.name, meta.get("name")),
        (target.namespace, meta.get("namespace")),
    ]
    return all(want is None or want == have for want, have in pairs)


def _remove(obj: Any, pointer: str) -> None:
    keys = [k.replace("~1", "/").replace("~0", "~") for k in pointer.split("/")[1:]]
    node = obj
    for key in keys[:-1]:
        if isinstance(node, dict):
            node = node.get(key)
        elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
            node = node[int(key)]
        else:
            return
    last = keys[-1] if keys else ""
    if isinstance(node, dict):
        node.pop(last, None)
    elif isinstance(node, list) and last.isdigit() and int(last) < len(node):
        node.pop(int(last))


def apply(objects: list[dict[str, Any]], exclusions: Iterable[DriftExclusion]) -> list[dict[str, Any]]:
    """Copies of `objects` without the excluded fields."""
    rules = list(exclusions)
    out = []
    for obj in objects:
        trimmed = copy.deepcopy(obj)
        for ex in rules:
            if _matches(ex.target, trimmed):
                for pointer in ex.paths:
                    _remove(trimmed, pointer)
        out.append(trimmed)
    return out

"""What a Helm upgrade would do to each object of a release, from the manifests (ADR 0113).

A dry run's `helm upgrade --install --dry-run=server -o json` carries the release as it would be
rendered; `helm get manifest` the release as it is installed. Comparing the two says, per object,
whether it would be created, changed (where), deleted or left alone. Secrets say only that their
data changes; no value is kept.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from fleetwave.api import yamlsafe
from fleetwave.delivery import content as ct

MAX_OBJECTS = 500
MAX_PATHS = 20
_SECRET_DATA = ("/data", "/stringData")


@dataclass(frozen=True, slots=True)
class ResourceChange:
    """One object of a release: `action` is Create | Update | Delete | No Action."""

    api_version: str
    kind: str
    namespace: str
    name: str
    action: str
    paths: tuple[str, ...] = ()


def rendered_manifest(upgrade_stdout: str) -> str:
    """The manifest of `helm upgrade ... -o json` ("" when there is none)."""
    try:
        data = json.loads(upgrade_stdout or "{}")
    except ValueError:
        return ""
    return str(data.get("manifest") or "") if isinstance(data, dict) else ""


def changes(installed: str, rendered: str, namespace: str) -> tuple[ResourceChange, ...]:
    """Per object, what replacing the `installed` manifest with the `rendered` one would do;
    objects that name no namespace are the release's `namespace`'s."""
    before, after = _objects(installed, namespace), _objects(rendered, namespace)
    out: list[ResourceChange] = []
    for key in sorted(set(before) | set(after)):
        old, new = before.get(key), after.get(key)
        if old is None:
            out.append(ResourceChange(*key, "Create"))
        elif new is None:
            out.append(ResourceChange(*key, "Delete"))
        else:
            paths = _paths(key[1], old, new)
            out.append(ResourceChange(*key, "Update" if paths else "No Action", paths))
    return tuple(out[:MAX_OBJECTS])


def _objects(manifest: str, namespace: str) -> dict[tuple[str, str, str, str], Mapping[str, Any]]:
    try:
        docs = yamlsafe.load_all(manifest, what="helm manifest") if manifest.strip() else []
    except yamlsafe.YamlError:
        return {}
    out: dict[tuple[str, str, str, str], Mapping[str, Any]] = {}
    for doc in docs:
        if not isinstance(doc, dict) or not doc.get("kind"):
            continue
        found = doc.get("metadata")
        meta: Mapping[str, Any] = found if isinstance(found, dict) else {}
        key = (
            str(doc.get("apiVersion") or ""),
            str(doc["kind"]),
            str(meta.get("namespace") or namespace),
            str(meta.get("name") or ""),
        )
        out[key] = doc
    return out


def _paths(kind: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> tuple[str, ...]:
    found: Iterable[str] = ct.diff_paths(old, new)
    if kind == "Secret":
        found = [next((d for d in _SECRET_DATA if p == d or p.startswith(d + "/")), p) for p in found]
    unique = list(dict.fromkeys(found))
    return tuple(unique[:MAX_PATHS])

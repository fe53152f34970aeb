"""Resolve and pin the content a profile delivers.

A profile references content (policyRefs to ConfigMaps/Secrets, helm values from valuesFrom). The
controller resolves every reference once, hashes the result, and stores it in an immutable,
content-addressed ConfigMap. ClusterSummaries point at that snapshot, never at the live ConfigMap, so
editing a referenced ConfigMap yields a *new* revision that walks through the stages again instead
of reaching every cluster at once.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import yaml

from fleetwave.api.sveltos import HelmChart, PolicyRef, ProfileSpec, ValueFrom
from fleetwave.delivery import content as dc

SNAPSHOT_PREFIX = "fw-content-"
SNAPSHOT_KEY = "content.json"


class Lookup(Protocol):
    """Read a ConfigMap or Secret of the management cluster (from the informer cache)."""

    def get(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None: ...


class ContentError(ValueError):
    """A reference cannot be resolved; the message names the field."""


@dataclass(frozen=True, slots=True)
class Resolved:
    hash: str
    body: dict[str, Any]  # {"policies": [...], "helmCharts": [...]}, JSON-serialisable

    @property
    def snapshot_name(self) -> str:
        return SNAPSHOT_PREFIX + self.hash[:40]


# Fields fleetwave parses (so manifests round-trip) but does not deliver yet: refusing them with a
# message beats silently deploying something other than what the user asked for.
_UNSUPPORTED = ("kustomization_refs", "template_resource_refs", "depends_on", "patches", "pre_delete_checks")


def resolve(spec: ProfileSpec, lookup: Lookup, *, default_namespace: str, path: str) -> Resolved:
    for field in _UNSUPPORTED:
        if getattr(spec, field):
            alias = ProfileSpec.model_fields[field].alias or field
            raise ContentError(f"{path}.{alias}: not supported by fleetwave yet")
    policies = []
    for i, ref in enumerate(spec.policy_refs or []):
        objects = _policy(ref, lookup, default_namespace, f"{path}.policyRefs[{i}]")
        if objects is not None:
            policies.append({"source": _source(ref, default_namespace), "tier": ref.tier, "objects": objects})
    charts = []
    for i, chart in enumerate(spec.helm_charts or []):
        values = _values(chart, lookup, default_namespace, f"{path}.helmCharts[{i}]")
        charts.append(
            {"chart": chart.model_dump(mode="json", by_alias=True, exclude_none=True), "values": values}
        )
    body = {"policies": policies, "helmCharts": charts}
    return Resolved(hash=hashlib.sha256(dc.canonical_json(body).encode()).hexdigest(), body=body)


def _source(ref: PolicyRef, default_namespace: str) -> str:
    return f"{ref.kind or 'ConfigMap'}/{ref.namespace or default_namespace}/{ref.name}"


def _read(
    lookup: Lookup, kind: str, namespace: str, name: str, optional: bool, path: str
) -> Mapping[str, Any] | None:
    obj = lookup.get(kind, namespace, name)
    if obj is None and not optional:
        raise ContentError(f"{path}: {kind} {namespace}/{name} not found")
    return obj


def _policy(ref: PolicyRef, lookup: Lookup, default_namespace: str, path: str) -> list[dict[str, Any]] | None:
    if ref.name is None:
        raise ContentError(f"{path}.name: required (remote URLs are not supported yet)")
    kind = ref.kind or "ConfigMap"
    obj = _read(lookup, kind, ref.namespace or default_namespace, ref.name, ref.optional, path)
    if obj is None:
        return None
    try:
        return dc.parse_policy_data(obj.get("data") or {}, base64_encoded=kind == "Secret", source=path)
    except dc.ContentError as e:
        raise ContentError(str(e)) from e


def _values(chart: HelmChart, lookup: Lookup, default_namespace: str, path: str) -> dict[str, Any]:
    """Inline `values` first, then each valuesFrom source in order (later keys win)."""
    merged: dict[str, Any] = {}
    if chart.values:
        merged = _deep_merge(merged, _yaml_map(chart.values, f"{path}.values"))
    for j, source in enumerate(chart.values_from or []):
        merged = _deep_merge(
            merged, _values_from(source, lookup, default_namespace, f"{path}.valuesFrom[{j}]")
        )
    return merged


def _values_from(source: ValueFrom, lookup: Lookup, default_namespace: str, path: str) -> dict[str, Any]:
    obj = _read(
        lookup, source.kind, source.namespace or default_namespace, source.name, source.optional, path
    )
    merged: dict[str, Any] = {}
    data: Mapping[str, str] = (obj or {}).get("data") or {}
    for key in sorted(data):
        text = base64.b64decode(data[key]).decode() if source.kind == "Secret" else data[key]
        merged = _deep_merge(merged, _yaml_map(text, f"{path}[{key}]"))
    return merged


def _yaml_map(text: str, path: str) -> dict[str, Any]:
    try:
        parsed = yaml.safe_load(text) or {}
    except yaml.YAMLError as e:
        raise ContentError(f"{path}: not valid YAML: {e}") from e
    if not isinstance(parsed, dict):
        raise ContentError(f"{path}: values must be a YAML mapping")
    return parsed


def _deep_merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def snapshot_configmap(resolved: Resolved, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": resolved.snapshot_name,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/managed-by": "fleetwave", "fleetwave.io/content": "snapshot"},
        },
        "immutable": True,
        "data": {SNAPSHOT_KEY: json.dumps(resolved.body, sort_keys=True, separators=(",", ":"))},
    }


def load_snapshot(configmap: Mapping[str, Any]) -> dict[str, Any]:
    raw = (configmap.get("data") or {}).get(SNAPSHOT_KEY)
    if raw is None:
        raise ContentError(
            f"content snapshot {configmap.get('metadata', {}).get('name')} has no {SNAPSHOT_KEY}"
        )
    body: dict[str, Any] = json.loads(raw)
    return body

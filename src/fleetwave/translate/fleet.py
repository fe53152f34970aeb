"""Fleet inventory from YAML or from cluster-registration objects (pure: text/dicts in, Fleet out).

A fleet file is `clusters: [{name, labels, ready}]` and/or MemberCluster, SveltosCluster or KubeFleet
MemberCluster objects (several YAML documents may be mixed). Every problem names its field.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fleetwave.api import yamlsafe
from fleetwave.api.codec import ManifestError, parse_object
from fleetwave.api.models import MemberCluster
from fleetwave.core import model as m
from fleetwave.translate.common import KEY_LABEL, NAME_LABEL, cluster_key
from fleetwave.translate.errors import Problem, TranslateError

_ENTRY_FIELDS = frozenset({"name", "labels", "ready"})


def _label_value(raw: object) -> str | None:
    # YAML reads `order: 1` as an int and `canary: true` as a bool; both are plainly meant as text.
    if isinstance(raw, bool):
        return "true" if raw else "false"
    if isinstance(raw, str | int):
        return str(raw)
    return None


def _labels(raw: object, path: str, problems: list[Problem]) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        problems.append(Problem(path, f"expected a mapping of label -> value, got {type(raw).__name__}"))
        return {}
    out: dict[str, str] = {}
    for key, value in raw.items():
        text = _label_value(value)
        if not isinstance(key, str) or not key:
            problems.append(Problem(path, f"label keys must be non-empty strings, got {key!r}"))
        elif text is None:
            problems.append(
                Problem(f"{path}.{key}", f"label values must be strings, got {type(value).__name__}")
            )
        else:
            out[key] = text
    return out


def _entry(raw: object, path: str, problems: list[Problem]) -> m.Cluster | None:
    if not isinstance(raw, dict):
        problems.append(Problem(path, "expected a mapping with name and labels"))
        return None
    for key in sorted(set(raw) - _ENTRY_FIELDS, key=str):
        problems.append(Problem(f"{path}.{key}", "unknown field (expected name, labels, ready)"))
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        problems.append(Problem(f"{path}.name", "required field is missing (a non-empty string)"))
        return None
    ready = raw.get("ready", True)
    if not isinstance(ready, bool):
        problems.append(Problem(f"{path}.ready", "must be true or false"))
    return m.Cluster(name, _labels(raw.get("labels"), f"{path}.labels", problems), ready is not False)


def _entries(doc: dict[str, Any], prefix: str, problems: list[Problem]) -> list[m.Cluster]:
    for key in sorted(set(doc) - {"clusters"}, key=str):
        problems.append(Problem(f"{prefix}{key}", "unknown field (expected clusters)"))
    raw = doc["clusters"]
    if not isinstance(raw, list):
        problems.append(Problem(f"{prefix}clusters", "expected a list of {name, labels}"))
        return []
    found = (_entry(item, f"{prefix}clusters[{i}]", problems) for i, item in enumerate(raw))
    return [c for c in found if c is not None]


def from_member_cluster(obj: MemberCluster) -> m.Cluster:
    """Labels select; a paused or not-ready member is in the plan but never delivered to."""
    ready = not obj.spec.paused and (obj.status is None or obj.status.ready is not False)
    return m.Cluster(obj.metadata.name, dict(obj.metadata.labels or {}), ready)


def _object(doc: dict[str, Any], prefix: str, problems: list[Problem]) -> m.Cluster | None:
    try:
        obj = parse_object(doc)
    except ManifestError as e:
        problems.extend(Problem(f"{prefix}{path}", msg) for path, msg in e.problems)
        return None
    if not isinstance(obj, MemberCluster):
        problems.append(
            Problem(
                f"{prefix}kind",
                f"{doc.get('kind')} is not a cluster registration "
                "(expected MemberCluster, SveltosCluster or a `clusters:` list)",
            )
        )
        return None
    return from_member_cluster(obj)


def _document(doc: object, prefix: str, problems: list[Problem]) -> list[m.Cluster]:
    if not isinstance(doc, dict):
        problems.append(Problem(prefix.rstrip(": "), "expected a mapping (`clusters:` or a cluster object)"))
        return []
    if "kind" in doc or "apiVersion" in doc:
        found = _object(doc, prefix, problems)
        return [] if found is None else [found]
    if "clusters" in doc:
        return _entries(doc, prefix, problems)
    problems.append(Problem(f"{prefix}clusters", "required field is missing"))
    return []


def fleet_of(clusters: Iterable[m.Cluster], problems: list[Problem] | None = None) -> m.Fleet:
    """Build the Fleet; duplicates are errors, and every cluster gets the NAME_LABEL label."""
    problems = [] if problems is None else problems
    seen: set[str] = set()
    named: list[m.Cluster] = []
    for c in clusters:
        if c.name in seen:
            problems.append(Problem("clusters", f"duplicate cluster name {c.name!r}"))
        seen.add(c.name)
        key = c.name if "/" in c.name else cluster_key(None, c.name)
        named.append(m.Cluster(c.name, {**c.labels, NAME_LABEL: c.name, KEY_LABEL: key}, c.ready))
    if not named and not problems:
        problems.append(Problem("clusters", "the fleet has no clusters"))
    if problems:
        raise TranslateError(problems)
    return m.Fleet.of(named)


def fleet_from_docs(docs: list[object]) -> m.Fleet:
    """Documents already parsed from YAML/JSON (or listed from an API server)."""
    problems: list[Problem] = []
    clusters: list[m.Cluster] = []
    for i, doc in enumerate(docs):
        prefix = f"document {i + 1}: " if len(docs) > 1 else ""
        clusters.extend(_document(doc, prefix, problems))
    return fleet_of(clusters, problems)


def fleet_from_yaml(text: str) -> m.Fleet:
    try:
        docs = [d for d in yamlsafe.load_all(text, what="fleet file") if d is not None]
    except yamlsafe.YamlError as e:
        raise TranslateError([Problem("", str(e))]) from None
    return fleet_from_docs(docs)

"""What an agent refuses to carry out (ADR 0106): work that is not its member's, work whose spec does
not match its revision (edited by something other than the hub's controller), and objects of kinds
the member's operator did not allow (`--allow-kind`). A refusal is reported, nothing is applied."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from fleetwave.controllers.fleet import pull

REFUSED = "WorkRefused"


def refusal(raw: Mapping[str, Any], *, namespace: str, cluster: str) -> str:
    """Why the work must not be carried out by the agent of `cluster` in hub namespace `namespace`
    ("" when it may)."""
    meta, spec = raw.get("metadata") or {}, raw.get("spec") or {}
    if meta.get("namespace") != namespace:
        return f"the work is in namespace {meta.get('namespace')}, not this member's ({namespace})"
    if spec.get("cluster") != cluster:
        return f"the work is for cluster {spec.get('cluster')}; this agent delivers to {cluster} only"
    unrevised = {k: v for k, v in spec.items() if k != "revision"}
    if spec.get("revision") != pull.revision_of(unrevised):
        return "spec.revision does not match the spec: it was changed by something other than the hub"
    if bool(spec.get("summary")) == bool(spec.get("placement")):
        return "the work must carry exactly one of spec.summary and spec.placement"
    return ""


def objects_of(raw: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    """Every object the work would apply (a summary's policies, a placement's objects)."""
    spec = raw.get("spec") or {}
    handed = spec.get("placement") or {}
    yield from (o for o in handed.get("objects") or [] if isinstance(o, Mapping))
    content = (spec.get("summary") or {}).get("content") or {}
    for policy in content.get("policies") or []:
        if isinstance(policy, Mapping) and policy.get("deploymentType") != "Local":
            yield from (o for o in policy.get("objects") or [] if isinstance(o, Mapping))


def kinds_refused(raw: Mapping[str, Any], allowed: frozenset[str] | None) -> str:
    """The first object whose kind is not allowed ("" when all are, or no allow-list is set). A kind is
    allowed by its name (`ConfigMap`) or its group and name (`apps/Deployment`)."""
    if allowed is None:
        return ""
    for obj in objects_of(raw):
        kind = str(obj.get("kind") or "")
        group = str(obj.get("apiVersion") or "").rpartition("/")[0]
        if kind not in allowed and f"{group}/{kind}" not in allowed:
            name = (obj.get("metadata") or {}).get("name")
            where = f"{group or 'core'}/{kind} {name}"
            return f"{where}: this member's agent does not apply that kind (--allow-kind)"
    return ""


def refused_outcome(message: str, now: str) -> dict[str, Any]:
    """A refusal in the shapes the hub reads: a summary's status and a placement's apply."""
    condition = {
        "type": "Ready",
        "status": "False",
        "reason": REFUSED,
        "message": message,
        "lastTransitionTime": now,
    }
    return {
        "failureMessage": f"refused by the member's agent: {message}",
        "conditions": [condition],
        "applied": {"ok": False, "message": f"refused by the member's agent: {message}"},
    }

"""What `fleetwave status promotion` shows, as plain data built from the API objects (pure).

Input: a ClusterPromotion and the ClusterSummaries of its stage profiles (as dicts) and `now`.
Per stage: phase, description, times, gates (with seconds left for time-based waits), approval and
each cluster's state (pending / delivering / done / failed) from the engine record + summaries.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from fleetwave.api import conditions
from fleetwave.core import timestamps

# Kept in sync with fleetwave.controllers.{promotion,summary_status}; duplicated rather than
# imported so the CLI's view does not pull the controller package in.
PROFILE_LABEL = "fleetwave.io/cluster-profile"
CLUSTER_LABEL = "fleetwave.io/cluster"
TERMINAL = ("Succeeded", "Failed", "RolledBack")


parse_time = timestamps.parse_optional


def stage_profile(promotion: str, stage: str) -> str:
    return f"{promotion}-{stage}"


def _index_summaries(summaries: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], Mapping[str, Any]]:
    """(stage profile, "namespace/cluster") -> summary."""
    out: dict[tuple[str, str], Mapping[str, Any]] = {}
    for s in summaries:
        meta = s.get("metadata") or {}
        labels = meta.get("labels") or {}
        spec = s.get("spec") or {}
        namespace = spec.get("clusterNamespace") or meta.get("namespace")
        cluster = f"{namespace}/{spec.get('clusterName') or labels.get(CLUSTER_LABEL)}"
        if labels.get(PROFILE_LABEL):
            out[(labels[PROFILE_LABEL], cluster)] = s
    return out


def cluster_state(
    cluster: str, record: Mapping[str, Any], summary: Mapping[str, Any] | None, content_hash: str
) -> tuple[str, str]:
    """(state, message) of one cluster of a stage: pending, delivering, done or failed."""
    failed = {f.get("cluster"): f.get("message", "") for f in record.get("failed") or []}
    if cluster in failed:
        return "failed", str(failed[cluster])
    if cluster not in (record.get("started") or []):
        return "pending", ""
    status = (summary or {}).get("status") or {}
    ready = conditions.get(status, "Ready")
    message = str(ready.get("message") or "")
    if summary is None or status.get("observedContentHash") != content_hash:
        return "delivering", message or "delivering the current revision"
    if ready.get("reason") == "Failed":
        return "failed", message
    if ready.get("status") == "True":
        return "done", message
    return "delivering", message


def _gate(gate: Mapping[str, Any], now: datetime) -> dict[str, Any]:
    until = parse_time(gate.get("until"))
    left = max((until - now).total_seconds(), 0.0) if until is not None else None
    return {
        "kind": gate.get("kind"),
        "state": gate.get("state"),
        "message": gate.get("message", ""),
        "until": gate.get("until"),
        "secondsLeft": None if left is None or gate.get("state") != "Waiting" else round(left, 1),
    }


def _approval(spec_stage: Mapping[str, Any], approvals: Mapping[str, Any]) -> dict[str, Any] | None:
    manual = (spec_stage.get("trigger") or {}).get("manual")
    if not isinstance(manual, Mapping):
        return None
    return {
        "approved": bool(manual.get("approved")),
        "automaticReset": manual.get("automaticReset", True),
        "approvedAt": approvals.get(str(spec_stage.get("name"))),
    }


@dataclass(frozen=True, slots=True)
class _Facts:
    """What every stage of one promotion is rendered against."""

    promotion: str
    summaries: Mapping[tuple[str, str], Mapping[str, Any]]
    content_hash: str
    approvals: Mapping[str, Any]
    now: datetime
    # The Flux source revisions each delivered content hash is made of (status.revisions, ADR 0103).
    sources: Mapping[str, list[str]] = field(default_factory=dict)


def _stage(
    spec_stage: Mapping[str, Any], record: Mapping[str, Any], reported: Mapping[str, Any], facts: _Facts
) -> dict[str, Any]:
    name = str(spec_stage.get("name") or record.get("name"))
    profile = stage_profile(facts.promotion, name)
    clusters = []
    for cluster in record.get("clusters") or []:
        summary = facts.summaries.get((profile, cluster))
        state, message = cluster_state(cluster, record, summary, facts.content_hash)
        runs = facts.sources.get(str(((summary or {}).get("status") or {}).get("observedContentHash")), [])
        clusters.append({"name": cluster, "state": state, "message": message, "sources": runs})
    return {
        "name": name,
        "phase": record.get("phase", "Pending"),
        "description": reported.get("currentStatusDescription") or record.get("message", ""),
        "startedAt": record.get("startedAt"),
        "succeededAt": record.get("succeededAt"),
        "clusters": clusters,
        "gates": [_gate(g, facts.now) for g in record.get("gates") or []],
        "approval": _approval(spec_stage, facts.approvals),
        # The Flux source revisions the stage's clusters run (ADR 0103): `main@sha1:abc1234`.
        "sources": [str(x) for x in reported.get("sources") or []],
    }


def _sources_by_hash(status: Mapping[str, Any]) -> dict[str, list[str]]:
    """Each recorded revision's delivered hash -> the Flux source revisions it was made of."""
    out: dict[str, list[str]] = {}
    for entry in status.get("revisions") or []:
        if isinstance(entry, Mapping) and entry.get("sources") and entry.get("snapshotHash"):
            out[str(entry["snapshotHash"])] = [str(x) for x in entry["sources"]]
    return out


def promotion_view(
    promotion: Mapping[str, Any], summaries: Iterable[Mapping[str, Any]], now: datetime
) -> dict[str, Any]:
    """The whole view of one ClusterPromotion (JSON-serialisable, stable keys)."""
    meta = promotion.get("metadata") or {}
    status = promotion.get("status") or {}
    rollout = status.get("rollout") or {}
    name = str(meta.get("name"))
    records = {r.get("name"): r for r in rollout.get("stages") or []}
    reported = {r.get("name"): r for r in status.get("stages") or []}
    facts = _Facts(
        name,
        _index_summaries(summaries),
        # The delivered content's hash (what summaries report); the revision's hash also covers how
        # stages are judged (ADR 0030), so it differs from it.
        str(status.get("profileSpecHash") or rollout.get("contentHash", "")),
        status.get("approvals") or {},
        now,
        _sources_by_hash(status),
    )
    stages = [
        _stage(s, records.get(s.get("name"), {}), reported.get(s.get("name"), {}), facts)
        for s in (promotion.get("spec") or {}).get("stages") or []
    ]
    observed = status.get("observedGeneration")
    return {
        "name": name,
        "generation": meta.get("generation"),
        "observedGeneration": observed,
        "phase": rollout.get("phase") or ("Pending" if not status else "Unknown"),
        "message": status.get("message") or ("waiting for the controller" if not rollout else ""),
        "currentStage": status.get("currentStageName"),
        "startedAt": rollout.get("startedAt"),
        "lastPromotionTime": status.get("lastPromotionTime"),
        "contentHash": rollout.get("contentHash"),
        "stages": stages,
        "conditions": [
            {k: c.get(k) for k in ("type", "status", "reason", "message", "lastTransitionTime")}
            for c in status.get("conditions") or []
        ],
        "now": timestamps.fmt(now),
    }


def is_finished(view: Mapping[str, Any]) -> bool:
    """The controller has seen the latest spec and the rollout of it succeeded, failed or was rolled
    back."""
    current = view.get("observedGeneration") == view.get("generation")
    return bool(current and view.get("phase") in TERMINAL)


def stage_of(view: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
    return next((s for s in view.get("stages") or [] if s.get("name") == name), None)


def waiting_for_approval(view: Mapping[str, Any]) -> list[str]:
    """Stages whose approval gate is waiting right now and which are not approved yet."""
    out = []
    for s in view.get("stages") or []:
        waits = any(g["kind"] == "Approval" and g["state"] == "Waiting" for g in s["gates"])
        if waits and s.get("approval") and not s["approval"]["approved"]:
            out.append(s["name"])
    return out

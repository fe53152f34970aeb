"""What the web page of `fleetwave ui` draws, as plain data built from the API objects (pure).

Every promotion and staged update run becomes a pipeline of stages; each stage carries its clusters as
tiles in one of five states, its gates (with the time a waiting gate opens, so the page counts down
by itself), counts per state (the page collapses big stages to them) and whether an Approve button
belongs on it. Phases and "waiting for" texts are `fleetwave status`'s (`ux.overview`), cluster states
`fleetwave status promotion`'s (`ux.view`), so the page and the terminal never disagree.

Tile states: pending (not started), waiting (not started, and its stage waits on a gate), inflight
(delivery started, not done), healthy (delivered and ready), failed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from fleetwave.api import conditions
from fleetwave.api.objects import Obj
from fleetwave.controllers.kubefleet import run_history
from fleetwave.controllers.sveltos import promotion_history
from fleetwave.core import timestamps
from fleetwave.ux import overview
from fleetwave.ux import view as v
from fleetwave.ux.approving import pending_request

STATES = ("pending", "waiting", "inflight", "healthy", "failed")
HISTORY_SHOWN = 10
MAX_MESSAGE = 500  # a cluster's or condition's message on the page (the object has all of it)
_FROM_VIEW = {"pending": "pending", "delivering": "inflight", "done": "healthy", "failed": "failed"}


def _cut(raw: Any) -> str:
    text = " ".join(str(raw or "").split())
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 1] + "…"


def rollout_id(kind: str, namespace: str | None, name: str) -> str:
    return f"{kind}/{namespace or '-'}/{name}"


def _waiting_gate(gates: Sequence[Obj]) -> bool:
    return any(g.get("state") == "Waiting" for g in gates)


def _tile(name: str, state: str, message: str, gated: bool) -> dict[str, Any]:
    if state == "pending" and gated:
        state = "waiting"
    return {"name": name, "state": state, "message": _cut(message)}


def _stage_state(phase: str, counts: Mapping[str, int], gated: bool) -> str:
    if counts["failed"] or phase == "Failed":
        return "failed"
    if phase == "Succeeded":
        return "healthy"
    if gated:
        return "waiting"
    if counts["inflight"] or counts["healthy"]:
        return "inflight"
    return "pending"


def _counts(tiles: Iterable[Obj]) -> dict[str, int]:
    counts = dict.fromkeys(STATES, 0)
    for tile in tiles:
        counts[str(tile["state"])] += 1
    return counts


def _gates(gates: Iterable[Obj]) -> list[dict[str, Any]]:
    return [
        {
            "kind": str(g.get("kind") or ""),
            "state": str(g.get("state") or ""),
            "message": _cut(g.get("message")),
            "until": g.get("until") if g.get("state") == "Waiting" else None,
        }
        for g in gates
    ]


def _stage(
    name: str,
    phase: str,
    description: str,
    times: tuple[Any, Any],
    tiles: list[dict[str, Any]],
    gates: list[dict[str, Any]],
    approve: bool,
) -> dict[str, Any]:
    counts = _counts(tiles)
    return {
        "name": name,
        "phase": phase,
        "state": _stage_state(phase, counts, _waiting_gate(gates)),
        "description": _cut(description),
        "startedAt": times[0],
        "succeededAt": times[1],
        "counts": counts,
        "clusters": tiles,
        "gates": gates,
        "approve": {"stage": name} if approve else None,
    }


def _conditions(status: Obj) -> list[dict[str, Any]]:
    return [
        {
            "type": c.get("type"),
            "status": c.get("status"),
            "reason": c.get("reason"),
            "message": _cut(c.get("message")),
            "lastTransitionTime": c.get("lastTransitionTime"),
        }
        for c in status.get("conditions") or []
    ]


def notes(entry: Obj) -> str:
    """One history entry's approvals, rollback and failure, as one line (also `fleetwave history`)."""
    parts = [", ".join(str(x) for x in entry.get("sources") or [])] if entry.get("sources") else []
    parts += [f"approved {a} at {at}" for a, at in sorted((entry.get("approvals") or {}).items())]
    if entry.get("rolledBackTo"):
        parts.append(f"rolled back to {entry['rolledBackTo']}")
    if entry.get("message"):
        parts.append(str(entry["message"]))
    return "; ".join(parts)


def _described(stage: Obj) -> str:
    """A promotion stage's description, and the Flux source revisions it runs (ADR 0103)."""
    text = str(stage["description"] or "")
    runs = ", ".join(str(x) for x in stage.get("sources") or [])
    return f"{text} · runs {runs}" if runs and text else (f"runs {runs}" if runs else text)


def _history_line(revision: Any, entry: Obj) -> dict[str, Any]:
    return {
        "revision": str(revision if revision is not None else ""),
        "startedAt": entry.get("startedAt"),
        "endedAt": entry.get("endedAt"),
        "outcome": str(entry.get("outcome") or ""),
        "note": _cut(notes(entry)),
    }


def promotion(obj: Obj, summaries: Iterable[Obj], now: datetime) -> dict[str, Any]:
    """A ClusterPromotion (native form) and the ClusterSummaries of its stage profiles."""
    shown = v.promotion_view(obj, summaries, now)
    row = overview.promotion_row(obj)
    waiting = set(v.waiting_for_approval(shown))
    stages = []
    for s in shown["stages"]:
        gates = _gates(s["gates"])
        gated = _waiting_gate(gates)
        tiles = [_tile(c["name"], _FROM_VIEW[c["state"]], c["message"], gated) for c in s["clusters"]]
        times = (s.get("startedAt"), s.get("succeededAt"))
        stages.append(
            _stage(
                s["name"],
                str(s["phase"]),
                _described(s),
                times,
                tiles,
                gates,
                s["name"] in waiting,
            )
        )
    status = obj.get("status") or {}
    history = promotion_history.entries(status)[-HISTORY_SHOWN:]
    return {
        "id": rollout_id("ClusterPromotion", None, row["name"]),
        "kind": "ClusterPromotion",
        "namespace": None,
        "name": row["name"],
        "phase": row["phase"],
        "currentStage": row["stage"],
        "waitingFor": row["waitingFor"],
        "revision": str(shown.get("contentHash") or ""),
        "startedAt": shown.get("startedAt"),
        "conditions": _conditions(status),
        "stages": stages,
        "history": [_history_line(e.get("revision"), e) for e in history],
    }


def _run_tile(entry: Obj, gated: bool) -> dict[str, Any]:
    done = conditions.get(entry, "Succeeded")
    if done.get("status") == "True":
        state = "healthy"
    elif done.get("status") == "False":
        state = "failed"
    elif conditions.is_true(entry, "Started"):
        state = "inflight"
    else:
        state = "pending"
    message = entry.get("message") or done.get("message") or ""
    return _tile(str(entry.get("clusterName") or ""), state, str(message), gated)


def _run_stage_description(entry: Obj, record: Obj) -> str:
    progressing = conditions.get(entry, "Progressing")
    return str(record.get("message") or progressing.get("message") or "")


def run(obj: Obj, siblings: Iterable[Obj]) -> dict[str, Any]:
    """A (Cluster)StagedUpdateRun; `siblings` are the runs of the same kind and namespace (the runs
    of its placement are its history: one revision each)."""
    meta = obj.get("metadata") or {}
    status = obj.get("status") or {}
    row = overview.run_row(obj)
    records = {str(r.get("name")): r for r in (status.get("rollout") or {}).get("stages") or []}
    stages = []
    for entry in status.get("stagesStatus") or []:
        name = str(entry.get("stageName") or "")
        record = records.get(name, {})
        gates = _gates(record.get("gates") or [])
        gated = _waiting_gate(gates)
        tiles = [_run_tile(c, gated) for c in entry.get("clusters") or []]
        approve = pending_request(status, name, created=True) is not None
        phase = str(record.get("phase") or "Pending")
        times = (entry.get("startTime"), entry.get("endTime"))
        stages.append(
            _stage(name, phase, _run_stage_description(entry, record), times, tiles, gates, approve)
        )
    placement = (obj.get("spec") or {}).get("placementName")
    mine = [r for r in siblings if (r.get("spec") or {}).get("placementName") == placement]
    mine.sort(key=lambda r: str((r.get("metadata") or {}).get("creationTimestamp") or ""))
    history = [run_history.entry(r) for r in mine[-HISTORY_SHOWN:]]
    snapshot = status.get("resourceSnapshotIndexUsed", (obj.get("spec") or {}).get("resourceSnapshotIndex"))
    kind = str(obj.get("kind") or "ClusterStagedUpdateRun")
    return {
        "id": rollout_id(kind, meta.get("namespace"), str(meta.get("name") or "")),
        "kind": kind,
        "namespace": meta.get("namespace"),
        "name": str(meta.get("name") or ""),
        "phase": row["phase"],
        "currentStage": row["stage"],
        "waitingFor": row["waitingFor"],
        "revision": f"snapshot {snapshot}" if snapshot not in (None, "") else "",
        "startedAt": (status.get("rollout") or {}).get("startedAt"),
        "conditions": _conditions(status),
        "stages": stages,
        "history": [_history_line(f"{e['run']} (snapshot {e['snapshotIndex']})", e) for e in history],
    }


def _clusters(members: Iterable[Obj], rollouts: Sequence[Obj]) -> list[dict[str, Any]]:
    """Every member cluster with its labels and what each rollout's stages hold for it."""
    runs: dict[str, list[dict[str, str]]] = {}
    for rollout in rollouts:
        for stage in rollout["stages"]:
            for tile in stage["clusters"]:
                runs.setdefault(str(tile["name"]), []).append(
                    {"rollout": rollout["id"], "stage": stage["name"], "state": tile["state"]}
                )
    out = []
    for member in members:
        meta = member.get("metadata") or {}
        name, namespace = str(meta.get("name") or ""), meta.get("namespace")
        # Promotions name a cluster namespace/name; staged runs by its name alone.
        held = runs.get(f"{namespace}/{name}", []) + (runs.get(name, []) if namespace else [])
        out.append(
            {"name": name, "namespace": namespace, "labels": dict(meta.get("labels") or {}), "runs": held}
        )
    return sorted(out, key=lambda c: (str(c["namespace"] or ""), c["name"]))


def build(
    promotions: Iterable[Obj],
    summaries: Iterable[Obj],
    runs: Iterable[Obj],
    members: Iterable[Obj],
    now: datetime,
    *,
    server: str = "",
    problems: Iterable[str] = (),
) -> dict[str, Any]:
    """The whole board: promotions (native form) with their stage profiles' summaries, staged update
    runs of both scopes, member clusters (native form), and what could not be read (`problems`)."""
    summaries = list(summaries)
    runs = list(runs)
    by_scope: dict[tuple[str, str], list[Obj]] = {}
    for r in runs:
        key = (str(r.get("kind") or ""), str((r.get("metadata") or {}).get("namespace") or ""))
        by_scope.setdefault(key, []).append(r)
    rollouts = [promotion(p, summaries, now) for p in promotions]
    for r in runs:
        key = (str(r.get("kind") or ""), str((r.get("metadata") or {}).get("namespace") or ""))
        rollouts.append(run(r, by_scope[key]))
    urgent = set(overview.ATTENTION)
    rollouts.sort(key=lambda r: (r["phase"] not in urgent, r["kind"], r["namespace"] or "", r["name"]))
    return {
        "now": timestamps.fmt(now),
        "server": server,
        "problems": sorted(set(problems)),
        "rollouts": rollouts,
        "clusters": _clusters(members, rollouts),
    }

"""One staged update run as an entry of its placement's history (pure): the snapshot it rolled out, when
it started and ended, its outcome, approvals with the time they were granted, why it failed and
what it was rolled back to — all read from the run's own status (`fleetwave history run`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fleetwave.api import conditions
from fleetwave.api.objects import Obj


def outcome(status: Obj) -> str:
    init, progressing, done = (conditions.get(status, t) for t in ("Initialized", "Progressing", "Succeeded"))
    if init.get("status") == "False":
        return "Failed"
    if done.get("status") == "True":
        return "Succeeded"
    if done.get("status") == "False":
        return "RolledBack" if done.get("reason") == "UpdateRunRolledBack" else "Failed"
    if not init:
        return "NotStarted"
    return {
        "UpdateRunRollingBack": "RollingBack",
        "UpdateRunStopped": "Stopped",
        "UpdateRunStopping": "Stopping",
        "UpdateRunNotStarted": "NotStarted",
    }.get(str(progressing.get("reason") or ""), "Progressing")


def entry(run: Obj) -> dict[str, Any]:
    status, spec = run.get("status") or {}, run.get("spec") or {}
    record = status.get("rollout") or {}
    init, done = conditions.get(status, "Initialized"), conditions.get(status, "Succeeded")
    failed = init if init.get("status") == "False" else done
    approvals = {
        str(name): str(seen.get("approvedAt"))
        for name, seen in (status.get("approvals") or {}).items()
        if isinstance(seen, Mapping) and seen.get("approvedAt")
    }
    rollback = record.get("rollback") or {}
    result = outcome(status)
    return {
        "run": str((run.get("metadata") or {}).get("name") or ""),
        "snapshotIndex": status.get("resourceSnapshotIndexUsed", spec.get("resourceSnapshotIndex")),
        "startedAt": record.get("startedAt") or init.get("lastTransitionTime"),
        "endedAt": done.get("lastTransitionTime") if done.get("status") in ("True", "False") else None,
        "outcome": result,
        "approvals": approvals,
        "message": str(failed.get("message") or "") if result in ("Failed", "RolledBack") else "",
        "rolledBackTo": str(rollback.get("label") or "") or None,
    }

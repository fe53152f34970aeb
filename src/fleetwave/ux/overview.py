"""`fleetwave status` with no argument: every rollout on one line — kind, name, phase, current stage and
what it waits for, in the words its status uses (pure: API objects as dicts in, rows out).

A promotion's line comes from its engine record (`status.rollout`: phase, current stage, rollback)
and its Progressing condition; a staged update run's from its conditions and its record. Rows are
sorted so a rollout that needs a person (failed, waiting, rolling back) comes first.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from fleetwave.api import conditions
from fleetwave.api.objects import Obj

MAX_MESSAGE = 200  # one line each: long condition messages are cut (the rollout's own status has all)
ATTENTION = ("Failed", "Invalid", "RollingBack", "Stuck", "Waiting", "Paused", "Stopped")


def _cut(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 1] + "…"


def _current_stage(record: Obj) -> str:
    back = record.get("rollback") or {}
    stages = back.get("stages") if back else record.get("stages")
    current = int((back or record).get("current") or 0)
    stages = stages or []
    if current < len(stages):
        return str(stages[current].get("name") or "")
    return ""


def promotion_row(obj: Obj) -> dict[str, Any]:
    status = obj.get("status") or {}
    record = status.get("rollout") or {}
    progressing, ready = conditions.get(status, "Progressing"), conditions.get(status, "Ready")
    phase = str(record.get("phase") or ("Pending" if not record else "Unknown"))
    if ready.get("status") == "False" and ready.get("reason") == "InvalidSpec":  # it cannot start
        phase, progressing = "Invalid", ready
    return {
        "kind": str(obj.get("kind") or "ClusterPromotion"),
        "apiVersion": str(obj.get("apiVersion") or ""),
        "namespace": None,
        "name": str((obj.get("metadata") or {}).get("name") or ""),
        "phase": phase,
        "stage": _current_stage(record),
        "waitingFor": _cut(str(progressing.get("message") or record.get("message") or "")),
    }


_RUN_PHASES = {
    "UpdateRunRollingBack": "RollingBack",
    "UpdateRunStuck": "Stuck",
    "UpdateRunWaiting": "Waiting",
    "UpdateRunStopped": "Stopped",
    "UpdateRunStopping": "Stopping",
    "UpdateRunNotStarted": "Initialized",
}


def run_row(obj: Obj) -> dict[str, Any]:
    status = obj.get("status") or {}
    meta = obj.get("metadata") or {}
    init, progressing, done = (conditions.get(status, t) for t in ("Initialized", "Progressing", "Succeeded"))
    record = status.get("rollout") or {}
    if init.get("status") == "False" or done.get("status") == "False":
        phase = "RolledBack" if done.get("reason") == "UpdateRunRolledBack" else "Failed"
        message = str((done or init).get("message") or "")
    elif done.get("status") == "True":
        phase, message = "Succeeded", ""
    elif not init:
        phase, message = "Pending", ""
    else:
        phase = _RUN_PHASES.get(str(progressing.get("reason") or ""), "Progressing")
        message = str(progressing.get("message") or "")
    return {
        "kind": str(obj.get("kind") or "ClusterStagedUpdateRun"),
        "apiVersion": str(obj.get("apiVersion") or ""),
        "namespace": meta.get("namespace"),
        "name": str(meta.get("name") or ""),
        "phase": phase,
        "stage": _current_stage(record) if phase not in ("Succeeded", "Pending") else "",
        "waitingFor": _cut(message),
    }


def rows(promotions: Iterable[Obj], runs: Iterable[Obj]) -> list[dict[str, Any]]:
    """Every rollout's line; those needing attention first, then by kind, namespace and name."""
    out = [promotion_row(p) for p in promotions] + [run_row(r) for r in runs]

    def order(row: Mapping[str, Any]) -> tuple[int, str, str, str]:
        urgent = 0 if row["phase"] in ATTENTION else 1
        return urgent, str(row["kind"]), str(row["namespace"] or ""), str(row["name"])

    return sorted(out, key=order)

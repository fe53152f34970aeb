"""`fleetwave history promotion|run NAME`: a rollout's past revisions and what happened to them (issue 13).

A promotion's come from its `status.revisions` (the newest 10: start, end, outcome, approvals with the
time they were first seen, the failure, what it was rolled back to). A staged update run is one
revision of its placement, so a run's history is its placement's runs (the newest 10, each with its
snapshot, start, end, outcome, approvals, failures and rollback), read from their status. Then the
Events of the object asked about (the newest `--events`: stages, failures, rollbacks). All bounded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from fleetwave.cli.common import STRUCTURED, KubeconfigOption, emit, fail, fail_api, management_client
from fleetwave.controllers.kubefleet import run_history
from fleetwave.controllers.sveltos import promotion_history
from fleetwave.kube import located, ops, sync_ops
from fleetwave.ux import board

console = Console()
app = typer.Typer(
    help="Past revisions of a rollout: outcome, approvals, failures, rollbacks.", no_args_is_help=True
)
# Event reasons worth a line in the history (the rest are progress detail).
_WORTH = frozenset(
    {
        "RolloutStarted",
        "Restarted",
        "StageStarted",
        "StageSucceeded",
        "ApprovalRequired",
        "ClusterFailed",
        "ClusterSetAside",
        "FailureBudgetExceeded",
        "ProgressDeadlineExceeded",
        "RollingBack",
        "RollbackStageSucceeded",
        "RolledBack",
        "RollbackImpossible",
        "UpdateRunFailed",
        "UpdateRunStuck",
    }
)
RUNS_SHOWN = 10


def _read(
    name: str, kubeconfig: Path | None, limit: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    with management_client(kubeconfig) as client:
        try:
            found = located.locate(client, "ClusterPromotion", name)
            if found is None:
                fail(f"ClusterPromotion {name} not found")
            raw = found.obj.to_dict()
            revisions = promotion_history.entries(raw.get("status") or {})
            events = sync_ops.events_about(client, str(raw["metadata"]["uid"]), "default", limit=500)
        except ops.ApiError as e:
            fail_api(e, f"cannot read the history of ClusterPromotion {name}")
    return revisions, _notable(events, limit)


def _notable(events: list[dict[str, Any]], limit: int) -> list[dict[str, Any]]:
    kept = [e for e in events if e.get("reason") in _WORTH]
    kept.sort(key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or ""))
    return kept[-limit:] if limit > 0 else []


@app.command("promotion")
def history_promotion(
    name: Annotated[str, typer.Argument(help="Name of the ClusterPromotion.")],
    events: Annotated[int, typer.Option("--events", min=0, max=200, help="Newest Events to show.")] = 20,
    output: Annotated[str, typer.Option("-o", "--output", help="table, json or yaml.")] = "table",
    kubeconfig: KubeconfigOption = None,
) -> None:
    """A promotion's revisions, newest last, then its newest notable Events."""
    if output not in ("table", *STRUCTURED):
        fail("--output must be table, json or yaml", code=2)
    revisions, notable = _read(name, kubeconfig, events)
    if output in STRUCTURED:
        emit({"revisions": revisions, "events": _slim(notable)}, output)
        return
    if not revisions:
        console.print(f"clusterpromotion/{name} has no recorded revision yet")
    else:
        table = Table(title=f"clusterpromotion/{name}: revisions", title_justify="left")
        for column in ("Revision", "Started", "Ended", "Outcome", "Notes"):
            table.add_column(column, overflow="fold")
        for entry in revisions:
            table.add_row(
                str(entry.get("revision", "")),
                str(entry.get("startedAt", ""))[:19].replace("T", " "),
                str(entry.get("endedAt") or "")[:19].replace("T", " "),
                str(entry.get("outcome", "")),
                board.notes(entry),
            )
        console.print(table)
    _print_events(notable)


def _print_events(notable: list[dict[str, Any]]) -> None:
    for event in notable:
        when = str(event.get("lastTimestamp") or "")[:19].replace("T", " ")
        console.print(f"{when}  {event.get('reason')}: {event.get('message')}", highlight=False)


def _slim(notable: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: e.get(k) for k in ("type", "reason", "message", "count", "lastTimestamp")} for e in notable]


@app.command("run")
def history_run(
    name: Annotated[str, typer.Argument(help="Name of the (Cluster)StagedUpdateRun.")],
    namespace: Annotated[
        str | None,
        typer.Option("--namespace", "-n", help="Namespace of a StagedUpdateRun; omit for cluster runs."),
    ] = None,
    events: Annotated[int, typer.Option("--events", min=0, max=200, help="Newest Events to show.")] = 20,
    output: Annotated[str, typer.Option("-o", "--output", help="table, json or yaml.")] = "table",
    kubeconfig: KubeconfigOption = None,
) -> None:
    """The runs of NAME's placement (each one revision), newest last, then NAME's notable Events."""
    if output not in ("table", *STRUCTURED):
        fail("--output must be table, json or yaml", code=2)
    kind = "StagedUpdateRun" if namespace is not None else "ClusterStagedUpdateRun"
    with management_client(kubeconfig) as client:
        try:
            found = located.locate(client, kind, name, namespace)
            if found is None:
                fail(f"{kind} {name} not found")
            raw = found.obj.to_dict()
            placement = (raw.get("spec") or {}).get("placementName")
            runs = sync_ops.list_dicts(client, found.resource, namespace=namespace)
            uid, where = str(raw["metadata"]["uid"]), namespace or "default"
            notable = _notable(sync_ops.events_about(client, uid, where, limit=500), events)
        except ops.ApiError as e:
            fail_api(e, f"cannot read the history of {kind} {name}")
    mine = [r for r in runs if (r.get("spec") or {}).get("placementName") == placement]
    mine.sort(key=lambda r: str((r.get("metadata") or {}).get("creationTimestamp") or ""))
    entries = [run_history.entry(r) for r in mine[-RUNS_SHOWN:]]
    if output in STRUCTURED:
        emit({"placement": placement, "runs": entries, "events": _slim(notable)}, output)
        return
    table = Table(title=f"placement {placement}: runs (newest last)", title_justify="left")
    for column in ("Run", "Snapshot", "Started", "Ended", "Outcome", "Notes"):
        table.add_column(column, overflow="fold")
    for entry in entries:
        table.add_row(
            ("* " if entry["run"] == name else "") + entry["run"],
            str(entry["snapshotIndex"]),
            str(entry["startedAt"] or "")[:19].replace("T", " "),
            str(entry["endedAt"] or "")[:19].replace("T", " "),
            entry["outcome"],
            board.notes(entry),
        )
    console.print(table)
    _print_events(notable)

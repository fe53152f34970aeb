"""`fleetwave history promotion NAME`: a promotion's past revisions and what happened to them (issue 13).

Read from the promotion's `status.revisions` (the newest 10: start, end, outcome, approvals with the
time they were first seen, the failure, what it was rolled back to) and from its Events (the newest
`--events` of them: stages, failures, rollbacks), both bounded.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from fleetwave.cli import located
from fleetwave.cli.common import KubeconfigOption, fail, management_client
from fleetwave.controllers import promotion_history
from fleetwave.kube import ops, sync_ops

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
    }
)


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
            fail(f"cannot read the history of ClusterPromotion {name}: {ops.message_of(e)}")
    kept = [e for e in events if e.get("reason") in _WORTH]
    kept.sort(key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or ""))
    return revisions, kept[-limit:]


def _notes(entry: dict[str, Any]) -> str:
    parts = []
    for approval, at in sorted((entry.get("approvals") or {}).items()):
        parts.append(f"approved {approval} at {at}")
    if entry.get("rolledBackTo"):
        parts.append(f"rolled back to {entry['rolledBackTo']}")
    if entry.get("message"):
        parts.append(str(entry["message"]))
    return "; ".join(parts)


@app.command("promotion")
def history_promotion(
    name: Annotated[str, typer.Argument(help="Name of the ClusterPromotion.")],
    events: Annotated[int, typer.Option("--events", min=0, max=200, help="Newest Events to show.")] = 20,
    output: Annotated[str, typer.Option("-o", "--output", help="table or json.")] = "table",
    kubeconfig: KubeconfigOption = None,
) -> None:
    """A promotion's revisions, newest last, then its newest notable Events."""
    if output not in ("table", "json"):
        fail("--output must be table or json", code=2)
    revisions, notable = _read(name, kubeconfig, events)
    if output == "json":
        slim = [
            {k: e.get(k) for k in ("type", "reason", "message", "count", "lastTimestamp")} for e in notable
        ]
        typer.echo(json.dumps({"revisions": revisions, "events": slim}, indent=2))
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
                _notes(entry),
            )
        console.print(table)
    for event in notable:
        when = str(event.get("lastTimestamp") or "")[:19].replace("T", " ")
        console.print(f"{when}  {event.get('reason')}: {event.get('message')}", highlight=False)

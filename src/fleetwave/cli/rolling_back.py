"""`fleetwave rollback promotion|run NAME`, `fleetwave abort promotion NAME`: ask the controller to roll
a rollout back (issue 13, ADR 0078).

The request is three annotations on the promotion — the revision to undo, optionally the one to
return to, and why — so it applies to that revision only and never to a later one. The controller
reverts every cluster the revision touched, last stage first, and the promotion ends RolledBack.
Abort is the same request made while a rollout is still going: stop it and put everything back.
A staged update run is one revision (one snapshot): the same annotations on the run return every
cluster it updated to the snapshot of the newest run of its placement that succeeded, or to the
snapshot index given.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from fleetwave.api import annotations as asks
from fleetwave.cli.common import (
    FORBIDDEN,
    KubeconfigOption,
    fail,
    fail_api,
    fail_promotion_patch,
    management_client,
)
from fleetwave.controllers.kubefleet import run_rollback, snapshots
from fleetwave.controllers.sveltos import promotion_history as history
from fleetwave.kube import located, ops, sync_ops
from fleetwave.kube.client import Client

console = Console()
rollback_app = typer.Typer(
    help="Roll a rollout back to the revision that last succeeded (or a chosen one).", no_args_is_help=True
)
abort_app = typer.Typer(help="Stop a rollout and roll back what it changed.", no_args_is_help=True)
_ROLLING = ("RollingBack", "RolledBack")


def _request(name: str, to_revision: int | None, reason: str, verb: str, kubeconfig: Path | None) -> None:
    with management_client(kubeconfig) as client:
        try:
            found = located.locate(client, "ClusterPromotion", name)
            if found is None:
                fail(f"ClusterPromotion {name} not found")
            status = found.obj.to_dict().get("status") or {}
            number, target = _plan(name, status, to_revision)
            patch = {
                "metadata": {
                    "annotations": {
                        asks.ROLLBACK: str(number),
                        asks.ROLLBACK_TO: str(to_revision) if to_revision else None,
                        asks.ROLLBACK_REASON: reason,
                    }
                }
            }
            sync_ops.merge_patch(client, found.resource, name, patch)
        except ops.ApiError as e:
            fail_promotion_patch(e, name, verb)
    console.print(
        f"clusterpromotion/{name}: rolling revision {number} back to revision {target.number}, last stage "
        f"first (`fleetwave status promotion {name} --watch` to follow)"
    )


def _plan(name: str, status: dict[str, Any], to_revision: int | None) -> tuple[int, history.Revision]:
    """The revision to undo and the one to return to, or a clear refusal."""
    record = status.get("rollout") or {}
    entries = history.entries(status)
    current = entries[-1] if entries else None
    if not record or current is None or current.get("contentHash") != record.get("contentHash"):
        fail(f"ClusterPromotion {name} has no recorded revision yet: nothing to roll back")
    if record.get("phase") in _ROLLING:
        console.print(f"clusterpromotion/{name} is already {record.get('phase')}: nothing to do")
        raise typer.Exit(0)
    target = history.rollback_target(entries, str(record.get("contentHash")), to_revision)
    if target is None:
        recorded = ", ".join(str(e.get("revision")) for e in entries)
        if to_revision is not None:
            fail(
                f"revision {to_revision} of ClusterPromotion {name} cannot be returned to: it is not "
                f"recorded, or has the same content (recorded revisions: {recorded})"
            )
        fail(f"no earlier revision of ClusterPromotion {name} succeeded: nothing to roll back to")
    return int(current.get("revision", 0)), target


@rollback_app.command("promotion")
def rollback_promotion(
    name: Annotated[str, typer.Argument(help="Name of the ClusterPromotion.")],
    to_revision: Annotated[
        int | None,
        typer.Option("--to-revision", min=1, help="Return to this revision (see status.revisions)."),
    ] = None,
    kubeconfig: KubeconfigOption = None,
) -> None:
    """Roll a promotion's current revision back, every cluster it updated, last stage first."""
    _request(name, to_revision, "requested with fleetwave rollback", "roll back", kubeconfig)


@abort_app.command("promotion")
def abort_promotion(
    name: Annotated[str, typer.Argument(help="Name of the ClusterPromotion.")],
    kubeconfig: KubeconfigOption = None,
) -> None:
    """Abort a promotion: nothing new starts and what it changed is rolled back."""
    _request(name, None, "aborted with fleetwave abort", "abort", kubeconfig)


@rollback_app.command("run")
def rollback_run(
    name: Annotated[str, typer.Argument(help="Name of the (Cluster)StagedUpdateRun.")],
    namespace: Annotated[
        str | None,
        typer.Option("--namespace", "-n", help="Namespace of a StagedUpdateRun; omit for cluster runs."),
    ] = None,
    to_revision: Annotated[
        int | None,
        typer.Option("--to-revision", min=0, help="Return to this resource snapshot index of the placement."),
    ] = None,
    kubeconfig: KubeconfigOption = None,
) -> None:
    """Roll a staged update run back: every cluster it updated returns to the previous good snapshot."""
    kind = "StagedUpdateRun" if namespace is not None else "ClusterStagedUpdateRun"
    with management_client(kubeconfig) as client:
        try:
            found = located.locate(client, kind, name, namespace)
            if found is None:
                fail(f"{kind} {name} not found")
            raw = found.obj.to_dict()
            index, target = _run_plan(client, found, kind, raw, to_revision)
            patch = {
                "metadata": {
                    "annotations": {
                        asks.ROLLBACK: index,
                        asks.ROLLBACK_TO: str(to_revision) if to_revision is not None else None,
                        asks.ROLLBACK_REASON: "requested with fleetwave rollback",
                    }
                }
            }
            sync_ops.merge_patch(client, found.resource, name, patch, namespace=namespace)
        except ops.ApiError as e:
            if ops.code_of(e) == FORBIDDEN:
                fail(
                    f"you are not allowed to roll back {kind} {name}: it needs get and patch on "
                    f"{kind.lower()}s, and list on the placement's runs and resource snapshots",
                    code=3,
                )
            fail_api(e, f"cannot roll back {kind} {name}")
    console.print(
        f"{kind.lower()}/{name}: rolling resource snapshot {index} back to {target.label}, last stage "
        f"first (`kubectl get {kind.lower()} {name}{f' -n {namespace}' if namespace else ''} -w` to follow, "
        f"`fleetwave history run {name}{f' -n {namespace}' if namespace else ''}` once it is done)",
        soft_wrap=True,
    )


def _run_plan(
    client: Client, found: located.Located, kind: str, raw: dict[str, Any], to: int | None
) -> tuple[str, run_rollback.Target]:
    """The run's snapshot index and the snapshot to return to, or a clear refusal."""
    name, namespace = raw["metadata"]["name"], raw["metadata"].get("namespace")
    status = raw.get("status") or {}
    record = status.get("rollout") or {}
    current = str((status.get("snapshot") or {}).get("hash") or "")
    if not record or not current:
        fail(f"{kind} {name} has not started: nothing to roll back")
    if record.get("phase") in _ROLLING:
        console.print(f"{kind.lower()}/{name} is already {record.get('phase')}: nothing to do")
        raise typer.Exit(0)
    placement = str((raw.get("spec") or {}).get("placementName") or "")
    snapshot_kind = "ResourceSnapshot" if namespace else "ClusterResourceSnapshot"
    listed = sync_ops.list_dicts(client, found.resource_of(snapshot_kind), namespace=namespace)
    existing = snapshots.of_placement(listed, placement, namespace)
    if to is not None:
        target = run_rollback.by_index(existing, to, current)
        if target is None:
            kept = ", ".join(str(snapshots.index_of(s)) for s in existing)
            fail(
                f"resource snapshot {to} of placement {placement} cannot be returned to: it does not exist, "
                f"or has the content {name} rolled out (snapshots kept: {kept})"
            )
        return str(status.get("resourceSnapshotIndexUsed") or ""), target
    runs = sync_ops.list_dicts(client, found.resource, namespace=namespace)
    target = run_rollback.last_good(runs, existing, placement, current)
    if target is None:
        fail(
            f"no earlier run of placement {placement} succeeded with a snapshot that still exists: "
            "nothing to roll back to (name one with --to-revision)"
        )
    return str(status.get("resourceSnapshotIndexUsed") or ""), target

"""`fleetwave rollback|abort promotion NAME`: ask the controller to roll a promotion's current revision
back (issue 13, ADR 0078).

The request is three annotations on the promotion — the revision to undo, optionally the one to
return to, and why — so it applies to that revision only and never to a later one. The controller
reverts every cluster the revision touched, last stage first, and the promotion ends RolledBack.
Abort is the same request made while a rollout is still going: stop it and put everything back.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from fleetwave.cli import located
from fleetwave.cli.common import KubeconfigOption, fail, fail_promotion_patch, management_client
from fleetwave.controllers import promotion_history as history
from fleetwave.kube import ops, sync_ops

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
                        history.ROLLBACK_ANNOTATION: str(number),
                        history.ROLLBACK_TO_ANNOTATION: str(to_revision) if to_revision else None,
                        history.ROLLBACK_REASON_ANNOTATION: reason,
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

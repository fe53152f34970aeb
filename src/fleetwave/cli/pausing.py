"""`fleetwave pause|resume promotion NAME`: set a promotion's `spec.paused` (issue 13).

Paused: clusters already being updated finish, no other cluster or stage starts, gate timers keep
their start. The patch is the one a user could write with kubectl; the controller does the rest.
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

from fleetwave.cli.common import KubeconfigOption, fail, fail_promotion_patch, management_client
from fleetwave.kube import located, ops, sync_ops

console = Console()
pause_app = typer.Typer(
    help="Pause a rollout: what is in flight finishes, nothing new starts.", no_args_is_help=True
)
resume_app = typer.Typer(help="Resume a paused rollout from where it stopped.", no_args_is_help=True)


def _set_paused(name: str, paused: bool, kubeconfig: KubeconfigOption) -> None:
    verb = "pause" if paused else "resume"
    with management_client(kubeconfig) as client:
        try:
            found = located.locate(client, "ClusterPromotion", name)
            if found is None:
                fail(f"ClusterPromotion {name} not found")
            if bool((found.obj.to_dict().get("spec") or {}).get("paused")) == paused:
                console.print(f"clusterpromotion/{name} is already {'paused' if paused else 'running'}")
                return
            sync_ops.merge_patch(client, found.resource, name, {"spec": {"paused": paused}})
        except ops.ApiError as e:
            fail_promotion_patch(e, name, verb)
    if paused:
        console.print(
            f"clusterpromotion/{name} paused: clusters in flight finish, nothing new starts "
            f"(`fleetwave resume promotion {name}` to go on)"
        )
    else:
        console.print(f"clusterpromotion/{name} resumed")


@pause_app.command("promotion")
def pause_promotion(
    name: Annotated[str, typer.Argument(help="Name of the ClusterPromotion.")],
    kubeconfig: KubeconfigOption = None,
) -> None:
    """Pause a promotion (sets spec.paused=true)."""
    _set_paused(name, True, kubeconfig)


@resume_app.command("promotion")
def resume_promotion(
    name: Annotated[str, typer.Argument(help="Name of the ClusterPromotion.")],
    kubeconfig: KubeconfigOption = None,
) -> None:
    """Resume a paused promotion (sets spec.paused=false)."""
    _set_paused(name, False, kubeconfig)

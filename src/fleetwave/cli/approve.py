"""`fleetwave approve ...`: give the manual approvals rollouts wait for (the same requests the web
page's Approve button makes: `ux.approving`)."""

from __future__ import annotations

from typing import Annotated, NoReturn

import typer
from rich.console import Console

from fleetwave.cli.common import KubeconfigOption, fail, management_client
from fleetwave.cli.exit_codes import EXIT_API, EXIT_FORBIDDEN, EXIT_USAGE
from fleetwave.ux import approving

console = Console()
app = typer.Typer(help="Approve stages that wait for a manual approval.", no_args_is_help=True)


def _refused(e: approving.Refused) -> NoReturn:
    fail(e.message, code=EXIT_FORBIDDEN if e.forbidden else EXIT_USAGE if e.invalid else EXIT_API)


@app.command("promotion")
def promotion(
    name: Annotated[str, typer.Argument(help="Name of the ClusterPromotion.")],
    stage: Annotated[str, typer.Option("--stage", help="The stage with a manual trigger to approve.")],
    kubeconfig: KubeconfigOption = None,
) -> None:
    """Approve a manual stage: sets its trigger.manual.approved=true (the patch checks the stage name).
    The promotion is looked up in fleetwave.io, then in config.projectsveltos.io."""
    with management_client(kubeconfig) as client:
        try:
            said = approving.approve_promotion(client, name, stage)
        except approving.Refused as e:
            _refused(e)
    console.print(said)


@app.command("run")
def run(
    name: Annotated[str, typer.Argument(help="Name of the (Cluster)StagedUpdateRun.")],
    stage: Annotated[str, typer.Option("--stage", help="The stage whose approval request to approve.")],
    namespace: Annotated[
        str | None,
        typer.Option("--namespace", "-n", help="Namespace of a StagedUpdateRun; omit for cluster runs."),
    ] = None,
    kubeconfig: KubeconfigOption = None,
) -> None:
    """Approve STAGE of a staged update run: its before-stage approval first, then its after-stage one."""
    with management_client(kubeconfig) as client:
        try:
            said = approving.approve_run(client, name, namespace, stage)
        except approving.Refused as e:
            _refused(e)
    console.print(said)

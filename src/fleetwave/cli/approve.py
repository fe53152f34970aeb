"""`fleetwave approve ...`: give the manual approvals rollouts wait for."""

from __future__ import annotations

from typing import Annotated

import typer
from lightkube import ApiError
from lightkube.types import PatchType
from rich.console import Console

from fleetwave import kinds
from fleetwave.cli.common import KubeconfigOption, fail, management_client
from fleetwave.ux import approval

console = Console()
app = typer.Typer(help="Approve stages that wait for a manual approval.", no_args_is_help=True)


@app.command("promotion")
def promotion(
    name: Annotated[str, typer.Argument(help="Name of the ClusterPromotion.")],
    stage: Annotated[str, typer.Option("--stage", help="The stage with a manual trigger to approve.")],
    kubeconfig: KubeconfigOption = None,
) -> None:
    """Approve a manual stage: sets spec.stages[i].trigger.manual.approved=true (guarded by its name)."""
    resource = kinds.resource("ClusterPromotion")
    with management_client(kubeconfig) as client:
        try:
            current = client.get(resource, name).to_dict()
            if approval.is_approved(current, stage):
                console.print(f"clusterpromotion/{name} stage {stage} is already approved")
                return
            client.patch(resource, name, approval.approval_patch(current, stage), patch_type=PatchType.JSON)
        except approval.ApprovalError as e:
            fail(str(e))
        except ApiError as e:
            if e.status.code == 404:
                fail(f"ClusterPromotion {name} not found")
            # 422 here means the `test` op failed: the stages changed between our read and our write.
            fail(f"cannot approve stage {stage} of ClusterPromotion {name}: {e.status.message}")
    console.print(f"clusterpromotion/{name} stage {stage} approved")

"""`fleetwave approve ...`: give the manual approvals rollouts wait for."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any

import typer
from lightkube import ApiError, Client
from lightkube.types import PatchType
from rich.console import Console

from fleetwave.cli.common import KubeconfigOption, fail, management_client
from fleetwave.kube import kinds
from fleetwave.ux import approval

console = Console()
app = typer.Typer(help="Approve stages that wait for a manual approval.", no_args_is_help=True)


@app.command("promotion")
def promotion(
    name: Annotated[str, typer.Argument(help="Name of the ClusterPromotion.")],
    stage: Annotated[str, typer.Option("--stage", help="The stage with a manual trigger to approve.")],
    kubeconfig: KubeconfigOption = None,
) -> None:
    """Approve a manual stage: sets its trigger.manual.approved=true (the patch checks the stage name)."""
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


def _pending_request(run: Any, stage: str) -> str | None:
    """The stage's before-stage request while unapproved, else its after-stage request."""
    for entry in (run.status or {}).get("stagesStatus") or []:
        if entry.get("stageName") != stage:
            continue
        for key in ("beforeStageTaskStatus", "afterStageTaskStatus"):
            for task in entry.get(key) or []:
                done = any(c.get("type") == "ApprovalRequestApproved" for c in task.get("conditions") or [])
                if task.get("approvalRequestName") and not done:
                    return str(task["approvalRequestName"])
    return None


def approve_request(client: Client, kind: str, name: str, namespace: str | None, *, reason: str) -> None:
    """What the seed's `kubectl patch ... --subresource=status` does: Approved=True for this generation."""
    resource = kinds.resource(kind)
    request = client.get(resource, name, namespace=namespace)
    condition = {
        "type": "Approved",
        "status": "True",
        "reason": reason,
        "message": f"approved with fleetwave approve ({reason})",
        "lastTransitionTime": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "observedGeneration": request.metadata.generation,
    }
    others = [c for c in (request.status or {}).get("conditions") or [] if c.get("type") != "Approved"]
    patch = {"status": {"conditions": [*others, condition]}}
    client.patch(resource.Status, name, patch, namespace=namespace, patch_type=PatchType.MERGE)


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
    namespaced = namespace is not None
    run_kind = "StagedUpdateRun" if namespaced else "ClusterStagedUpdateRun"
    request_kind = "ApprovalRequest" if namespaced else "ClusterApprovalRequest"
    with management_client(kubeconfig) as client:
        try:
            request = _pending_request(client.get(kinds.resource(run_kind), name, namespace=namespace), stage)
            if request is None:
                fail(f"{run_kind} {name} has no pending approval for stage {stage!r}")
            approve_request(client, request_kind, request, namespace, reason=f"{run_kind}Approved")
        except ApiError as e:
            fail(f"cannot approve stage {stage} of {run_kind} {name}: {e.status.message}")
    console.print(f"{request_kind.lower()}/{request} approved")

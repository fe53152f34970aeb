"""`fleetwave approve ...`: give the manual approvals rollouts wait for."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any

import typer
from rich.console import Console

from fleetwave.cli import located
from fleetwave.cli.common import KubeconfigOption, fail, management_client
from fleetwave.core import timestamps
from fleetwave.kube import kinds, ops, sync_ops
from fleetwave.kube.client import Client
from fleetwave.ux import approval

console = Console()
app = typer.Typer(help="Approve stages that wait for a manual approval.", no_args_is_help=True)


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
            found = located.locate(client, "ClusterPromotion", name)
            if found is None:
                fail(f"ClusterPromotion {name} not found")
            resource = found.resource
            current = found.obj.to_dict()
            if approval.is_approved(current, stage):
                console.print(f"clusterpromotion/{name} stage {stage} is already approved")
                return
            sync_ops.json_patch(client, resource, name, approval.approval_patch(current, stage))
        except approval.ApprovalError as e:
            fail(str(e))
        except ops.ApiError as e:
            if ops.is_not_found(e):
                fail(f"ClusterPromotion {name} not found")
            if ops.code_of(e) == FORBIDDEN:
                needs = (
                    "get and patch clusterpromotions.fleetwave.io (or clusterpromotions."
                    "config.projectsveltos.io for Sveltos' group; cluster-scoped)"
                )
                fail(_not_allowed(needs), code=3)
            # 422 here means the `test` op failed: the stages changed between our read and our write.
            fail(f"cannot approve stage {stage} of ClusterPromotion {name}: {ops.message_of(e)}")
    console.print(f"clusterpromotion/{name} stage {stage} approved")


FORBIDDEN = 403


def _not_allowed(needs: str) -> str:
    return f"you are not allowed to approve: approving needs {needs}; see docs/security.md (Approvals)"


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


def approve_request(
    client: Client, kind: str, name: str, namespace: str | None, *, reason: str, resource: Any = None
) -> None:
    """What the seed's `kubectl patch ... --subresource=status` does: Approved=True for this generation."""
    resource = resource if resource is not None else kinds.resource(kind)
    request = client.get(resource, name, namespace=namespace)
    condition = {
        "type": "Approved",
        "status": "True",
        "reason": reason,
        "message": f"approved with fleetwave approve ({reason})",
        "lastTransitionTime": timestamps.fmt(dt.datetime.now(dt.UTC)),
        "observedGeneration": request.metadata.generation,
    }
    others = [c for c in (request.status or {}).get("conditions") or [] if c.get("type") != "Approved"]
    patch = {"status": {"conditions": [*others, condition]}}
    sync_ops.merge_patch(client, resource, name, patch, namespace=namespace, status=True)


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
            found = located.locate(client, run_kind, name, namespace)
            if found is None:
                fail(f"{run_kind} {name} not found")
            request = _pending_request(found.obj, stage)
            if request is None:
                fail(f"{run_kind} {name} has no pending approval for stage {stage!r}")
            resource = found.resource_of(request_kind)
            approve_request(
                client, request_kind, request, namespace, reason=f"{run_kind}Approved", resource=resource
            )
        except ops.ApiError as e:
            if ops.code_of(e) == FORBIDDEN:
                where = f"in namespace {namespace}" if namespaced else "(cluster-scoped)"
                needs = (
                    f"get {run_kind.lower()}s and {request_kind.lower()}s, and patch"
                    f" {request_kind.lower()}s/status {where} (group fleetwave.io, or"
                    " placement.kubernetes-fleet.io for KubeFleet's)"
                )
                fail(_not_allowed(needs), code=3)
            fail(f"cannot approve stage {stage} of {run_kind} {name}: {ops.message_of(e)}")
    console.print(f"{request_kind.lower()}/{request} approved")

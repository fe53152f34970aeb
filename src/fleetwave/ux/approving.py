"""Giving a manual approval, as the caller: the one implementation behind `fleetwave approve` and the
web page's Approve button (`fleetwave ui`), so both perform exactly the same request.

A promotion's stage is approved by a JSON patch of its spec (`ux.approval`); a staged update run's by
setting Approved=True on the status of its pending (Cluster)ApprovalRequest, as the seed's
`kubectl patch ... --subresource=status` does. A refusal is a `Refused` whose message says what was
wrong, or which rights approving needs when the API server said 403.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from fleetwave.core import timestamps
from fleetwave.kube import kinds, located, ops, sync_ops
from fleetwave.kube.client import Client
from fleetwave.ux import approval

FORBIDDEN = 403


class Refused(Exception):
    """The approval was not given; `forbidden` when the API server refused the caller the right."""

    def __init__(
        self, message: str, *, forbidden: bool = False, missing: bool = False, invalid: bool = False
    ) -> None:
        super().__init__(message)
        self.message = message
        self.forbidden = forbidden
        self.missing = missing
        self.invalid = invalid  # the request names no stage that can be approved: bad input


def not_allowed(needs: str) -> str:
    return f"you are not allowed to approve: approving needs {needs} (fleetwave security model: Approvals)"


PROMOTION_RIGHTS = (
    "get and patch clusterpromotions.fleetwave.io (or clusterpromotions."
    "config.projectsveltos.io for Sveltos' group; cluster-scoped)"
)


def _not_about_approving(error: ops.ApiError) -> bool:
    """Credentials refused, throttling, a failing server: the same whatever was asked, so the
    CLI's one-line explanation says it (with its exit code) better than "cannot approve"."""
    code = ops.code_of(error)
    return code in (401, 429) or code >= 500


def approve_promotion(client: Client, name: str, stage: str) -> str:
    """Approve `stage` of ClusterPromotion `name`; returns what was done (also when already done)."""
    try:
        found = located.locate(client, "ClusterPromotion", name)
        if found is None:
            raise Refused(f"ClusterPromotion {name} not found", missing=True)
        current = found.obj.to_dict()
        if approval.is_approved(current, stage):
            return f"clusterpromotion/{name} stage {stage} is already approved"
        sync_ops.json_patch(client, found.resource, name, approval.approval_patch(current, stage))
    except approval.ApprovalError as e:
        raise Refused(str(e), invalid=True) from None
    except ops.ApiError as e:
        if _not_about_approving(e):
            raise
        if ops.is_not_found(e):
            raise Refused(f"ClusterPromotion {name} not found", missing=True) from None
        if ops.code_of(e) == FORBIDDEN:
            raise Refused(not_allowed(PROMOTION_RIGHTS), forbidden=True) from None
        # 422 here means the `test` op failed: the stages changed between our read and our write.
        raise Refused(
            f"cannot approve stage {stage} of ClusterPromotion {name}: {ops.message_of(e)}"
        ) from None
    return f"clusterpromotion/{name} stage {stage} approved"


def pending_request(run_status: Mapping[str, Any], stage: str, *, created: bool = False) -> str | None:
    """The stage's before-stage request while unapproved, else its after-stage request; with
    `created`, only a request the controller has already created (what a person can approve now)."""
    for entry in run_status.get("stagesStatus") or []:
        if entry.get("stageName") != stage:
            continue
        for key in ("beforeStageTaskStatus", "afterStageTaskStatus"):
            for task in entry.get(key) or []:
                types = {c.get("type") for c in task.get("conditions") or []}
                if not task.get("approvalRequestName") or "ApprovalRequestApproved" in types:
                    continue
                if created and "ApprovalRequestCreated" not in types:
                    continue
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


def approve_run(client: Client, name: str, namespace: str | None, stage: str) -> str:
    """Approve `stage` of a (Cluster)StagedUpdateRun: its before-stage approval first, then its
    after-stage one. Returns what was approved."""
    namespaced = namespace is not None
    run_kind = "StagedUpdateRun" if namespaced else "ClusterStagedUpdateRun"
    request_kind = "ApprovalRequest" if namespaced else "ClusterApprovalRequest"
    try:
        found = located.locate(client, run_kind, name, namespace)
        if found is None:
            raise Refused(f"{run_kind} {name} not found", missing=True)
        request = pending_request(found.obj.status or {}, stage)
        if request is None:
            raise Refused(f"{run_kind} {name} has no pending approval for stage {stage!r}")
        resource = found.resource_of(request_kind)
        approve_request(
            client, request_kind, request, namespace, reason=f"{run_kind}Approved", resource=resource
        )
    except ops.ApiError as e:
        if _not_about_approving(e):
            raise
        if ops.code_of(e) == FORBIDDEN:
            where = f"in namespace {namespace}" if namespaced else "(cluster-scoped)"
            needs = (
                f"get {run_kind.lower()}s and {request_kind.lower()}s, and patch"
                f" {request_kind.lower()}s/status {where} (group fleetwave.io, or"
                " placement.kubernetes-fleet.io for KubeFleet's)"
            )
            raise Refused(not_allowed(needs), forbidden=True) from None
        raise Refused(f"cannot approve stage {stage} of {run_kind} {name}: {ops.message_of(e)}") from None
    return f"{request_kind.lower()}/{request} approved"

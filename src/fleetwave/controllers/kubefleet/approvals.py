"""(Cluster)ApprovalRequests of a run: create them, read approvals, acknowledge them (ApprovalAccepted).

An approval counts when `Approved` is True for the request's current generation; a condition
without observedGeneration (as in the seed's namespaced `kubectl patch`) counts too. Once accepted it
cannot be revoked. Requests are owned by their run, so deleting the run deletes them.

An after-stage approval is requested under upstream's name `<run>-after-<stage>` and under seed
004's `<run>-<stage>` (ADR 0112): one approval, two doors. Approving either counts once; both are
then marked accepted, and the one not patched by a person also Approved, naming the one that was,
so `kubectl get` shows the same verdict whichever name a script reads.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fleetwave.api.conditions import find, is_true
from fleetwave.api.objects import Obj
from fleetwave.controllers.kubefleet import naming as nm
from fleetwave.controllers.shared.context import Context, as_dict
from fleetwave.core import status as st
from fleetwave.kube import ops
from fleetwave.kube.status import Versioned


def approved(req: Obj) -> bool:
    cond = find(req.get("status"), "Approved")
    if cond is None or cond.get("status") != "True":
        return False
    seen, generation = cond.get("observedGeneration"), (req.get("metadata") or {}).get("generation")
    return seen is None or generation is None or int(seen) == int(generation)


def accepted(req: Obj) -> bool:
    return is_true(req.get("status"), "ApprovalAccepted")


def of_run(ctx: Context, scope: nm.Scope, namespace: str | None, run: str) -> dict[str, Obj]:
    """The run's requests from the cache, by name."""
    out: dict[str, Obj] = {}
    for req in ctx.cache.list(scope.approval):
        meta = req.get("metadata") or {}
        if meta.get("namespace") == namespace and (req.get("spec") or {}).get("parentStageRollout") == run:
            out[str(meta["name"])] = req
    return out


async def ensure(
    ctx: Context, scope: nm.Scope, obj: Any, stage: str, name: str, *, same_as: str = ""
) -> None:
    """The request `name` of a stage exists, owned by the run (`obj`: the run as last read);
    `same_as`: the upstream-named request this seed-named one is the same approval as."""
    meta = obj.metadata
    body: dict[str, Any] = {
        "apiVersion": ctx.api_version(scope.approval),
        "kind": scope.approval,
        "metadata": {
            "name": name,
            "labels": {
                nm.RUN_LABEL: meta.name,
                nm.STAGE_LABEL: stage,
                nm.TASK_LABEL: "beforeStage" if name.endswith(f"-before-{stage}") else "afterStage",
                nm.LATEST_APPROVAL_LABEL: "true",
            },
            "ownerReferences": [
                {
                    "apiVersion": ctx.api_version(scope.run),
                    "kind": scope.run,
                    "name": meta.name,
                    "uid": meta.uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {"parentStageRollout": meta.name, "targetStage": stage},
    }
    if scope.namespaced:
        body["metadata"]["namespace"] = meta.namespace
    if same_as:
        body["metadata"]["annotations"] = {nm.SAME_APPROVAL_ANNOTATION: same_as}
    # Already there: a retry, or cache lag. The event names the upstream-named request only.
    if await ops.create_if_absent(ctx.client, body) and not same_as:
        await ctx.event(
            obj, False, "ApprovalRequired", f"stage {stage} waits for approval ({scope.approval} {name})"
        )


def _mirrored(name: str, generation: Any, approved_as: str, now: datetime) -> dict[str, Any]:
    """Approved on the other name of an approval a person gave under `approved_as`."""
    return {
        "type": "Approved",
        "status": "True",
        "reason": "ApprovedUnderAnotherName",
        "message": f"approved as {approved_as}: {name} and {approved_as} are one approval",
        "lastTransitionTime": st.fmt(now),
        "observedGeneration": generation,
    }


async def accept(
    ctx: Context, scope: nm.Scope, name: str, namespace: str | None, now: datetime, approved_as: str
) -> None:
    """Acknowledge an approval given as `approved_as` on the request `name`; a conflict is left to
    the next reconcile (the watch brings it back)."""
    obj = ctx.cache.obj(scope.approval, namespace, name)
    if obj is None:
        return
    status = dict(getattr(obj, "status", None) or {})
    conditions = [c for c in status.get("conditions") or [] if c.get("type") != "ApprovalAccepted"]
    if name != approved_as and not approved(as_dict(obj)):
        conditions = [c for c in conditions if c.get("type") != "Approved"]
        conditions.append(_mirrored(name, obj.metadata.generation, approved_as, now))
    conditions.append(
        {
            "type": "ApprovalAccepted",
            "status": "True",
            "reason": "ApprovalRequestApprovalAccepted",
            "message": "the approval request has been approved and cannot be reverted",
            "lastTransitionTime": st.fmt(now),
            "observedGeneration": obj.metadata.generation,
        }
    )
    await ctx.write_status(scope.approval, Versioned.of(obj), {**status, "conditions": conditions})

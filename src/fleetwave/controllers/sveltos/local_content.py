"""Sveltos `deploymentType: Local`: policyRef content for the management cluster itself (ADR 0064).

There is one management cluster, so Local content is applied once per rollout object — by a
ClusterProfile for itself, by a ClusterPromotion for all its stages — when a revision is pinned, not
once per member (a stage profile leaves it to its promotion). Objects carry the owner's inventory
(`local/<Kind>/<name>`) and a non-controller owner reference, so deleting the owner lets garbage
collection remove them; a new revision prunes what left the content. The tier rule of ADR 0063
decides between two owners of one object. What the controller may do there is its RBAC: fleetwave
grants nothing for Local content, and refuses whatever the controller itself runs on
(`local_boundary`: its namespace, Leases, Events, RBAC, admission, its own API), when the content is
resolved and again here, before anything is applied.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fleetwave.controllers.fleet.boundary import Boundary, content_boundary
from fleetwave.controllers.shared.context import Context
from fleetwave.controllers.sveltos import content
from fleetwave.controllers.sveltos import rollout_common as common
from fleetwave.controllers.sveltos import summary_status as ss
from fleetwave.delivery import manifests
from fleetwave.delivery.target import ManagementTarget, MemberUnreachable
from fleetwave.kube import kinds

STATUS_FIELD = "localContent"


def objects(body: Mapping[str, Any], tier: int) -> list[dict[str, Any]]:
    """The Local objects of a resolved content body, annotated with their tiers."""
    return [
        manifests.with_tier(o, (tier, int(p.get("tier") or manifests.DEFAULT_TIER)))
        for p in body.get("policies") or []
        if p.get("deploymentType") == content.LOCAL
        for o in p.get("objects") or []
    ]


def inventory(kind: str, name: str) -> str:
    return f"local/{kind}/{name}"


async def deploy(
    ctx: Context, kind: str, obj: Any, raw: Mapping[str, Any], resolved: content.Resolved, spec: Any
) -> dict[str, Any]:
    """Apply the revision's Local content (once per revision, again after a failure); the status
    fragment that reports it ({} when the object has none and never had)."""
    annotations = raw["metadata"].get("annotations") or {}
    if annotations.get(common.PINNED_ANNOTATION):
        return {}  # a promotion's stage profile: its promotion deploys the Local content
    previous = dict((raw.get("status") or {}).get(STATUS_FIELD) or {})
    wanted = objects(resolved.body, int(getattr(spec, "tier", manifests.DEFAULT_TIER)))
    if not wanted and not previous.get("deployedKinds"):
        return {}
    if previous.get("hash") == resolved.hash and not previous.get("errors"):
        return {STATUS_FIELD: previous}
    owner = {
        "apiVersion": ctx.api_version(kind),
        "kind": kind,
        "name": obj.metadata.name,
        "uid": obj.metadata.uid,
    }
    refused = _refused(wanted, content_boundary(ctx))
    if refused:  # a snapshot pinned before a rule existed is held to it all the same
        await ctx.event(obj, True, "LocalDeploymentFailed", "Local content (management cluster): " + refused)
        return {STATUS_FIELD: {**previous, "errors": [refused]}}
    owned = [_owned_by(o, owner) for o in wanted]
    try:
        status = {"hash": resolved.hash, **await _apply(ctx, kind, obj, owned, previous, spec)}
    except MemberUnreachable as e:
        return {STATUS_FIELD: {**previous, "errors": [str(e)]}}
    if status["errors"]:
        message = "Local content (management cluster): " + "; ".join(status["errors"][:3])
        await ctx.event(obj, True, "LocalDeploymentFailed", message)
    return {STATUS_FIELD: status}


async def _apply(
    ctx: Context, kind: str, obj: Any, owned: list[dict[str, Any]], previous: Mapping[str, Any], spec: Any
) -> dict[str, Any]:
    """Apply `owned` to the management cluster and prune what the last revision left; the status
    fragment without the hash."""
    inv = inventory(kind, str(obj.metadata.name))
    policy = manifests.ApplyPolicy(
        stop_on_error=not getattr(spec, "continue_on_error", False),
        stop_on_conflict=not getattr(spec, "continue_on_conflict", False),
    )
    target = ManagementTarget(ctx.client)
    before = {kinds.GVK(a, k) for a, k in ss.deployed_kinds(previous.get("deployedKinds") or [])}
    report = await manifests.apply(target, owned, inventory=inv, policy=policy)
    if report.ok:
        await manifests.prune(target, inventory=inv, kinds=before | report.kinds, keep=report.refs)
    deployed = sorted(
        {ss.gvk_string(g.api_version, g.kind) for g in report.kinds}
        | set(previous.get("deployedKinds") or [])
    )
    return {
        "objects": len(report.objects),
        "deployedKinds": deployed,
        "errors": report.errors[:20] or None,
    }


def _refused(wanted: list[dict[str, Any]], boundary: Boundary) -> str | None:
    for obj in wanted:
        why = boundary.local_problem(obj)
        if why is not None:
            return f"{obj.get('kind')} {(obj.get('metadata') or {}).get('name')} refused: {why}"
    return None


def _owned_by(obj: Mapping[str, Any], owner: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(obj)
    meta = dict(out.get("metadata") or {})
    refs = [r for r in meta.get("ownerReferences") or [] if r.get("uid") != owner["uid"]]
    meta["ownerReferences"] = [*refs, dict(owner)]
    out["metadata"] = meta
    return out

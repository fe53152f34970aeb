"""ClusterPromotion reconcile: one profileSpec carried stage by stage behind triggers.

Per stage a generated ClusterProfile `<promotion>-<stage>` (owned by the promotion) lists exactly
the clusters the engine has admitted so far and delivers the content snapshot the promotion pinned;
the preHealthCheckDeployment goes out through `preverification-<promotion>-<stage>`. Facts come from
the ClusterSummaries of the stage profiles, postDelayHealthChecks run against the stage's clusters,
and approvals are read from `spec.stages[i].trigger.manual.approved`.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from lightkube import ApiError, codecs
from lightkube.types import PatchType

from fleetwave import translate
from fleetwave.api import codec
from fleetwave.api.models import ClusterPromotion
from fleetwave.controllers import content, engine_state, members, profile, promotion_status, requeue
from fleetwave.controllers import rollout_facts as rf
from fleetwave.controllers import summary_status as ss
from fleetwave.controllers.context import Context, as_dict
from fleetwave.core import effects as fx
from fleetwave.core import engine
from fleetwave.core import model as m
from fleetwave.core import status as st
from fleetwave.kube import kinds
from fleetwave.kube.status import StatusWrite, write_status
from fleetwave.runtime.controller import Result

log = logging.getLogger(__name__)

PROMOTION_LABEL = "fleetwave.io/promotion"
STAGE_LABEL = "fleetwave.io/stage"
HEALTH_POLL = timedelta(seconds=2)


def stage_profile_name(promotion: str, stage: str) -> str:
    return f"{promotion}-{stage}"


async def reconcile(ctx: Context, key: str) -> Result:
    obj = ctx.cache.obj("ClusterPromotion", None, key)
    if obj is None or obj.metadata.deletionTimestamp:
        return Result()  # stage profiles are owned: garbage collection takes them and their content
    raw = as_dict(obj)
    try:
        parsed = codec.parse_object(
            {**raw, "apiVersion": f"{kinds.GROUP}/{kinds.VERSION}", "kind": "ClusterPromotion"}
        )
        assert isinstance(parsed, ClusterPromotion)
        resolved = content.resolve(
            parsed.spec.profile_spec, ctx.cache, default_namespace=ctx.namespace, path="spec.profileSpec"
        )
        # Deliveries and approvals wake us through watches; post-delay health checks run on member
        # clusters we do not watch, so while waiting on facts the engine re-checks every 2 s.
        spec = dataclasses.replace(
            translate.from_promotion(parsed, content_hash=resolved.hash), poll_interval=HEALTH_POLL
        )
    except (codec.ManifestError, content.ContentError, translate.TranslateError) as e:
        return await profile.report_invalid(ctx, obj, raw, str(e))
    await profile.ensure_snapshot(ctx, resolved)
    now = ctx.clock()
    previous = engine_state.previous_of(raw)
    fleet = members.fleet(members.from_object(o) for o in ctx.cache.list("MemberCluster"))
    approvals = _approvals(parsed, raw, now)
    deliveries = _deliveries(ctx, key, previous, resolved.hash, fleet)
    observed = m.Observed(
        delivery=deliveries,
        health=await _health(ctx, parsed, previous, fleet),
        approvals=approvals,
        previous=previous,
    )
    decision = engine.step(spec, fleet, observed, now)
    await _act(ctx, obj, parsed, resolved, decision)
    status = promotion_status.build(
        parsed,
        decision.status,
        resolved.hash,
        spec.revision.stages_hash,
        approvals,
        deliveries,
        generation=raw["metadata"].get("generation"),
        previous=raw.get("status") or {},
    )
    written = await write_status(ctx.client, kinds.resource("ClusterPromotion"), obj, status)
    if written is StatusWrite.CONFLICT:
        return Result(requeue=True)
    # Consuming an approval edits the spec, an input of this very decision: only once the decision
    # is recorded in status, or a conflict would replay the step without the approval that made it.
    for effect in decision.effects:
        if isinstance(effect, fx.ResetApproval):
            await _reset_approval(ctx, parsed, effect.stage)
    return requeue.after(decision, now)


def _deliveries(
    ctx: Context, promotion: str, previous: st.RolloutStatus | None, content_hash: str, fleet: m.Fleet
) -> dict[str, m.Delivery]:
    if previous is None:
        return {}
    out = {}
    for stage in previous.stages:
        summaries = profile.summaries_of(ctx, stage_profile_name(promotion, stage.name))
        for cluster in stage.clusters:
            if cluster in fleet.names:
                out[cluster] = rf.delivery_of(summaries.get(cluster), content_hash)
    return out


def _approvals(promotion: ClusterPromotion, raw: Mapping[str, Any], now: datetime) -> dict[str, datetime]:
    """When each approval was first seen (kept in status so a restart does not move it)."""
    seen = ((raw.get("status") or {}).get("approvals")) or {}
    out = {}
    for name in translate.pre_approved(promotion):
        out[name] = promotion_status.parse_time(seen.get(name)) or now
    return out


async def _health(
    ctx: Context, promotion: ClusterPromotion, previous: st.RolloutStatus | None, fleet: m.Fleet
) -> dict[tuple[str, str], m.HealthVerdict]:
    """postDelayHealthChecks of the current stage, only while its after-gates are being evaluated."""
    current = previous.current_stage if previous else None
    if current is None or current.phase is not st.StagePhase.WAITING_AFTER:
        return {}
    stage = next(s for s in promotion.spec.stages if s.name == current.name)
    trigger = stage.trigger.auto or stage.trigger.manual if stage.trigger else None
    checks = (trigger.post_delay_health_checks or []) if trigger else []
    verdicts: dict[tuple[str, str], m.HealthVerdict] = {}
    for check in checks:
        verdicts[(stage.name, check.name)] = m.HealthVerdict(ok=True)
        for cluster in current.clusters:
            target = members.target_for(ctx.cache, cluster) if cluster in fleet.names else None
            if target is None:
                verdicts[(stage.name, check.name)] = m.HealthVerdict(
                    False, cluster, "cluster is not reachable"
                )
                break
            result = await ctx.health.check(target, [check], objects=())
            if not result.ok:
                verdicts[(stage.name, check.name)] = m.HealthVerdict(False, cluster, result.message)
                break
    return verdicts


async def _act(
    ctx: Context, obj: Any, promotion: ClusterPromotion, resolved: content.Resolved, decision: fx.Decision
) -> None:
    name = promotion.metadata.name
    for stage in decision.status.stages:
        if stage.started:
            await _ensure_profile(ctx, obj, promotion, stage.name, stage.started, resolved, policy_refs=None)
    for effect in decision.effects:
        match effect:
            case fx.DeployPreHealthCheck(stage=stage_name):
                clusters = next(s.clusters for s in decision.status.stages if s.name == stage_name)
                refs = _pre_health_refs(promotion, stage_name)
                await _ensure_profile(ctx, obj, promotion, stage_name, clusters, resolved, policy_refs=refs)
            case fx.RemovePreHealthCheck(stage=stage_name):
                await _delete_profile(ctx, translate.sveltos.pre_verification_name(name, stage_name))
            case fx.RequestApproval(stage=stage_name):
                await ctx.event(
                    obj, False, "ApprovalRequired", f"stage {stage_name} waits for manual approval"
                )
            case fx.Event(reason=reason, message=message):
                await ctx.event(obj, reason in ("ClusterFailed", "ProgressDeadlineExceeded"), reason, message)
            case _:
                pass  # Deliver/Withdraw are carried out level-triggered above


def _pre_health_refs(promotion: ClusterPromotion, stage_name: str) -> list[dict[str, Any]]:
    stage = next(s for s in promotion.spec.stages if s.name == stage_name)
    trigger = stage.trigger.auto or stage.trigger.manual if stage.trigger else None
    refs = (trigger.pre_health_check_deployment or []) if trigger else []
    return [r.model_dump(mode="json", by_alias=True, exclude_none=True) for r in refs]


async def _ensure_profile(
    ctx: Context,
    owner: Any,
    promotion: ClusterPromotion,
    stage: str,
    clusters: tuple[str, ...],
    resolved: content.Resolved,
    *,
    policy_refs: list[dict[str, Any]] | None,
) -> None:
    name = promotion.metadata.name
    spec = promotion.spec.profile_spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    spec.pop("maxUpdate", None)  # the promotion paces clusters; a stage profile delivers to what it lists
    annotations = {
        profile.PINNED_ANNOTATION: resolved.snapshot_name,
        profile.PINNED_HASH_ANNOTATION: resolved.hash,
    }
    profile_name = stage_profile_name(name, stage)
    if policy_refs is not None:  # the pre-verification payload is live content, not the pinned rollout
        spec = {"policyRefs": policy_refs, "syncMode": "Continuous"}
        annotations = {}
        profile_name = translate.sveltos.pre_verification_name(name, stage)
    spec["clusterRefs"] = [
        {
            "apiVersion": rf.CLUSTER_API_VERSION,
            "kind": "MemberCluster",
            "namespace": c.partition("/")[0],
            "name": c.partition("/")[2],
        }
        for c in sorted(clusters)
    ]
    body = {
        "apiVersion": f"{kinds.GROUP}/{kinds.VERSION}",
        "kind": "ClusterProfile",
        "metadata": {
            "name": profile_name,
            "labels": {PROMOTION_LABEL: name, STAGE_LABEL: stage},
            "annotations": annotations,
            "ownerReferences": [
                {
                    "apiVersion": f"{kinds.GROUP}/{kinds.VERSION}",
                    "kind": "ClusterPromotion",
                    "name": name,
                    "uid": owner.metadata.uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": spec,
    }
    current = ctx.cache.get("ClusterProfile", None, profile_name)
    if (
        current is not None
        and current.get("spec") == _with_defaults(current.get("spec"), spec)
        and all(
            ((current.get("metadata") or {}).get("annotations") or {}).get(k) == v
            for k, v in annotations.items()
        )
    ):
        return
    await ctx.client.apply(codecs.from_dict(body), force=True)


def _with_defaults(current: Any, desired: Mapping[str, Any]) -> Any:
    """The desired spec as the API server stores it (schema defaults filled in from the current)."""
    if not isinstance(current, Mapping):
        return desired
    return {**{k: v for k, v in current.items() if k not in desired}, **desired}


async def _delete_profile(ctx: Context, name: str) -> None:
    try:
        await ctx.client.delete(kinds.resource("ClusterProfile"), name)
    except ApiError as e:
        if e.status.code != 404:
            raise


async def _reset_approval(ctx: Context, promotion: ClusterPromotion, stage_name: str) -> None:
    index = next(i for i, s in enumerate(promotion.spec.stages) if s.name == stage_name)
    patch = [{"op": "replace", "path": f"/spec/stages/{index}/trigger/manual/approved", "value": False}]
    await ctx.client.patch(
        kinds.resource("ClusterPromotion"), promotion.metadata.name, patch, patch_type=PatchType.JSON
    )


__all__ = ["PROMOTION_LABEL", "STAGE_LABEL", "reconcile", "ss", "stage_profile_name"]

"""ClusterPromotion reconcile: one profileSpec carried stage by stage behind triggers.

Runs the shared rollout skeleton (`rollout_reconcile`). Per stage a generated ClusterProfile
`<promotion>-<stage>` (owned by the promotion) lists exactly the clusters the engine has admitted so
far and delivers the content snapshot the promotion pinned; the preHealthCheckDeployment goes out
through `preverification-<promotion>-<stage>`. Facts come from the ClusterSummaries of the stage
profiles, postDelayHealthChecks run against the stage's clusters, and approvals are read from
`spec.stages[i].trigger.manual.approved`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from fleetwave import translate
from fleetwave.api import annotations as asks
from fleetwave.api import sveltos
from fleetwave.api.models import ClusterPromotion
from fleetwave.controllers.fleet import members
from fleetwave.controllers.fleet.boundary import content_boundary
from fleetwave.controllers.gates import analysis_gates, webhook_gates
from fleetwave.controllers.shared.context import Context, Wake, as_dict
from fleetwave.controllers.shared.echoes import tracked
from fleetwave.controllers.sveltos import (
    content,
    profile_withdrawal,
    promotion_history,
    promotion_preserve,
    promotion_status,
    promotion_withdrawal,
    rollout_reconcile,
    summary_writes,
)
from fleetwave.controllers.sveltos import rollout_common as common
from fleetwave.controllers.sveltos import rollout_facts as rf
from fleetwave.controllers.sveltos.rollout_reconcile import Observation, Pass, Prepared
from fleetwave.core import effects as fx
from fleetwave.core import model as m
from fleetwave.core import rollback, timestamps
from fleetwave.core import status as st
from fleetwave.kube import ops
from fleetwave.runtime.controller import Result
from fleetwave.runtime.watching import slimmed

log = logging.getLogger(__name__)

KIND = "ClusterPromotion"
PROMOTION_LABEL = "fleetwave.io/promotion"
STAGE_LABEL = "fleetwave.io/stage"

Run = Pass[ClusterPromotion]


def stage_profile_name(promotion: str, stage: str) -> str:
    return f"{promotion}-{stage}"


@dataclass(frozen=True, slots=True)
class _Facts:
    approvals: Mapping[str, datetime]  # when each approval was first seen
    deliveries: Mapping[str, m.Delivery]
    revisions: list[dict[str, Any]]  # status.revisions as this pass found it


@dataclass(frozen=True, slots=True)
class _StageProfile:
    """A generated ClusterProfile of one stage, before its clusterRefs are filled in."""

    name: str
    stage: str
    spec: Mapping[str, Any]
    annotations: Mapping[str, str]


WATCHED_POLL = 30.0  # seconds: the re-check under watches, for a promotion whose facts all come by watch


def fact_poll(promotion: ClusterPromotion, judge_poll: float) -> float:
    """How often a promotion waiting on facts re-checks them (ADR 0117). Deliveries (its summaries'
    watch, woken on news) and approvals (its own spec) come by watch: a pass every `judge_poll`
    found nothing new, and 90 promotions waiting on deliveries filled two thirds of the queue with
    such passes. Webhooks and analyses are only learnt by asking, and post-delay health checks
    may have no member watch (a member without one): a promotion with any of them keeps
    `judge_poll`. The longer poll stays as the net under a missed watch event."""
    stages = promotion.spec.stages or []
    asks_for_facts = any(
        stage.webhooks
        or stage.analyses
        or ((trigger := _stage_trigger(stage)) is not None and trigger.post_delay_health_checks)
        for stage in stages
    )
    return judge_poll if asks_for_facts else max(judge_poll, WATCHED_POLL)


class _Promotions:
    kind = KIND

    def prepare(self, ctx: Context, raw: Mapping[str, Any]) -> Prepared[ClusterPromotion]:
        promotion = common.parse_as(raw, KIND, ClusterPromotion)
        resolved = common.resolve(ctx, promotion.spec.profile_spec, "spec.profileSpec")
        _check_pre_health_refs(ctx, promotion)
        spec = replace(
            translate.from_promotion(promotion, content_hash=resolved.hash),
            poll_interval=timedelta(seconds=fact_poll(promotion, ctx.judge_poll)),
        )
        return Prepared(promotion, resolved, spec)

    async def observe(self, ctx: Context, run: Run) -> Observation[_Facts]:
        revisions = promotion_history.entries(run.raw.get("status") or {})
        facts = _Facts(_approvals(run), _deliveries(ctx, run, revisions), revisions)
        target, request = _rollback(run, revisions)
        observed = m.Observed(
            delivery=facts.deliveries,
            health=await _health(ctx, run),
            approvals=facts.approvals,
            previous=run.previous,
            rollback_target=target,
            rollback_request=request,
            webhooks=await _webhooks(ctx, run),
            analyses=await _analyses(ctx, run),
        )
        return Observation(observed, facts)

    async def act(self, ctx: Context, run: Run, facts: _Facts, decision: fx.Decision) -> None:
        # Deliver/Withdraw are carried out level-triggered: stage profiles list what the engine started
        # (during a rollback, what it started rolling back, at the target's snapshot).
        record = decision.status.rollback
        target = promotion_history.by_content(facts.revisions, record.target) if record else None
        # A stage's clusters: those the plan started there, then those that joined it later.
        touched = rollback.touched_by_stage(decision.status)
        for stage, started in zip(decision.status.stages, touched, strict=True):
            back = _rollback_stage(record, stage.name)
            if back is not None and back.started and target is not None:
                pinned = (target.snapshot, target.snapshot_hash)
                wanted = _delivery_profile(run, stage, pinned)
                written = await _ensure_profile(ctx, run, wanted, back.started)
                if written is not None:
                    _pass_now(ctx, wanted.name, written)  # a rollback's summaries are not written ahead
            elif started:
                pinned = (run.resolved.snapshot_name, run.resolved.hash)
                await _deliver_stage(ctx, run, _delivery_profile(run, stage, pinned), started)
        for effect in decision.effects:
            await _carry_out(ctx, run, decision, effect)
        await _remove_finished_verifications(ctx, run, decision)

    def status(self, run: Run, facts: _Facts, decision: fx.Decision) -> dict[str, Any]:
        revisions = promotion_history.record(
            facts.revisions,
            decision.status,
            run.resolved.snapshot_name,
            run.resolved.hash,
            run.now,
            facts.approvals,
            run.resolved.sources,
        )
        built = promotion_status.build(
            run.parsed,
            decision.status,
            run.resolved.hash,
            run.spec.revision.stages_hash,
            facts.approvals,
            facts.deliveries,
            generation=run.generation,
            previous=run.raw.get("status") or {},
            sources=promotion_history.running_sources(revisions, decision.status, run.resolved.sources),
        )
        return {**built, promotion_history.FIELD: revisions}

    def progress_only(self, previous: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
        return promotion_status.progress_only(previous, new)

    async def after_status(self, ctx: Context, run: Run, decision: fx.Decision) -> None:
        # Consuming an approval edits the spec, an input of this very decision: only once the decision
        # is recorded in status, or a conflict would replay the step without the approval that made it.
        for effect in decision.effects:
            if isinstance(effect, fx.ResetApproval):
                await _reset_approval(ctx, run.parsed, effect.stage)


_PROMOTIONS = _Promotions()


async def reconcile(ctx: Context, key: str) -> Result:
    obj = ctx.cache.obj(KIND, None, key)
    if obj is not None:
        for guard in (promotion_withdrawal.guard, promotion_preserve.guard):
            ended = await guard(ctx, obj, stage_profile_name)
            if ended is not None:
                return ended
    return await rollout_reconcile.reconcile(ctx, key, _PROMOTIONS)


def _check_pre_health_refs(ctx: Context, promotion: ClusterPromotion) -> None:
    """preHealthCheckDeployment refs are resolved by a generated profile later; what can be refused
    without reading (kind, namespace) is refused here, in the promotion's own status."""
    for i, stage in enumerate(promotion.spec.stages):
        trigger = stage.trigger.auto or stage.trigger.manual if stage.trigger else None
        if trigger and trigger.pre_health_check_deployment:
            kind = "auto" if stage.trigger and stage.trigger.auto else "manual"
            content.check_refs(
                trigger.pre_health_check_deployment,
                default_namespace=ctx.namespace,
                path=f"spec.stages[{i}].trigger.{kind}.preHealthCheckDeployment",
                boundary=content_boundary(ctx),
                flux=ctx.artifacts is not None,
            )


def _deliveries(ctx: Context, run: Run, revisions: list[dict[str, Any]]) -> dict[str, m.Delivery]:
    """Each cluster's delivery of the revision being delivered: the current one, or during a
    rollback the one it returns to."""
    if run.previous is None:
        return {}
    wanted = run.resolved.hash
    if run.previous.rollback is not None:
        target = promotion_history.by_content(revisions, run.previous.rollback.target)
        if target is None:
            return {}  # the record of the target is gone: nothing counts as rolled back
        wanted = target.snapshot_hash
    joined: dict[int, list[str]] = {}
    for cluster, index in run.previous.late_joiners:
        joined.setdefault(index, []).append(cluster)
    out = {}
    for index, stage in enumerate(run.previous.stages):
        summaries = common.summaries_of(ctx.cache, stage_profile_name(run.key, stage.name))
        for cluster in (*stage.clusters, *joined.get(index, ())):
            if cluster in run.fleet.names:
                out[cluster] = rf.delivery_of(summaries.get(cluster), wanted)
    return out


def _rollback(run: Run, revisions: list[dict[str, Any]]) -> tuple[m.RollbackTarget | None, str]:
    """The revision a rollback would return to, and a person's request to roll back now (only for
    the revision it names, and not while a new revision is about to start)."""
    prev = run.previous
    if prev is None:
        return None, ""
    annotations = run.raw["metadata"].get("annotations") or {}
    asked = str(annotations.get(asks.ROLLBACK) or "")
    unchanged = prev.content_hash == run.spec.revision.content_hash and (
        prev.stages_hash == run.spec.revision.stages_hash
    )
    requested = unchanged and asked == str(promotion_history.current(revisions, prev))
    to = str(annotations.get(asks.ROLLBACK_TO) or "") if requested else ""
    found = promotion_history.rollback_target(revisions, prev.content_hash, int(to) if to.isdigit() else None)
    reason = ""
    if requested:
        given = annotations.get(asks.ROLLBACK_REASON)
        reason = str(given or "requested with fleetwave rollback")[:256]
    return (found.target if found else None), reason


def _rollback_stage(record: st.RollbackStatus | None, stage: str) -> st.StageStatus | None:
    if record is None:
        return None
    return next((s for s in record.stages if s.name == stage), None)


def _approvals(run: Run) -> dict[str, datetime]:
    """When each approval was first seen (kept in status so a restart does not move it)."""
    seen = ((run.raw.get("status") or {}).get("approvals")) or {}
    return {
        name: timestamps.parse_optional(seen.get(name)) or run.now
        for name in translate.pre_approved(run.parsed)
    }


def _trigger(
    promotion: ClusterPromotion, stage_name: str
) -> sveltos.AutoTrigger | sveltos.ManualTrigger | None:
    return _stage_trigger(next(s for s in promotion.spec.stages if s.name == stage_name))


def _stage_trigger(stage: sveltos.Stage) -> sveltos.AutoTrigger | sveltos.ManualTrigger | None:
    """The stage's auto or manual trigger (None when it has neither)."""
    return stage.trigger.auto or stage.trigger.manual if stage.trigger else None


async def _health(ctx: Context, run: Run) -> dict[tuple[str, str], m.HealthVerdict]:
    """postDelayHealthChecks of the current stage, only while its after-gates are being evaluated
    (during a rollback, of the stage being rolled back, over its rolled-back clusters)."""
    prev = run.previous
    current = prev.current_stage if prev else None
    if prev is not None and prev.rollback is not None:
        current = prev.rollback.current_stage
    if current is None or current.phase is not st.StagePhase.WAITING_AFTER:
        return {}
    trigger = _trigger(run.parsed, current.name)
    checks = (trigger.post_delay_health_checks or []) if trigger else []
    wake = ctx.wake(KIND, run.key)
    return {
        (current.name, check.name): await _verdict(
            ctx,
            run.fleet,
            check,
            current.clusters,
            None if wake is None else Wake((wake.key, current.name, check.name), wake.call),
            owner=f"{KIND}//{run.parsed.metadata.name}",
        )
        for check in checks
    }


async def _webhooks(ctx: Context, run: Run) -> dict[tuple[str, str], m.HealthVerdict]:
    """The current stage's webhooks (ADR 0080), only while its after-gates are being evaluated."""
    judged = webhook_gates.judged_stage(run.previous)
    if judged is None:
        return {}
    name, clusters = judged
    stage = next(s for s in run.parsed.spec.stages if s.name == name)
    if not stage.webhooks:
        return {}
    return await webhook_gates.verdicts(ctx, _owner(run), name, clusters, stage.webhooks, run.now)


async def _analyses(ctx: Context, run: Run) -> analysis_gates.Facts:
    """The current stage's analyses (ADR 0081), only while its after-gates are being evaluated."""
    judged = webhook_gates.judged_stage(run.previous)
    if judged is None:
        return {}
    name, clusters = judged
    stage = next(s for s in run.parsed.spec.stages if s.name == name)
    if not stage.analyses:
        return {}
    return await analysis_gates.measurements(ctx, _owner(run), name, clusters, stage.analyses, run.now)


def _owner(run: Run) -> webhook_gates.Owner:
    return webhook_gates.Owner(KIND, run.parsed.metadata.name, None, run.resolved.hash)


async def _verdict(
    ctx: Context,
    fleet: m.Fleet,
    check: sveltos.ValidateHealth,
    clusters: tuple[str, ...],
    wake: Wake | None,
    *,
    owner: str,
) -> m.HealthVerdict:
    """One check over every cluster of the stage: the first failing one is named in the message, all
    of them are listed for the failure budget."""
    failing: list[tuple[str, str]] = []
    for cluster in clusters:
        found = cluster in fleet.names
        target = (
            members.target_for(ctx.cache, cluster, with_capi=members.with_capi(ctx.cache)) if found else None
        )
        if target is None:
            failing.append((cluster, "cluster is not reachable"))
            continue
        result = await ctx.health.check(target, [check], objects=(), wake=wake, owner=owner)
        if not result.ok:
            failing.append((cluster, result.message))
    if not failing:
        return m.HealthVerdict(ok=True)
    return m.HealthVerdict(False, failing[0][0], failing[0][1], tuple(failing))


async def _carry_out(ctx: Context, run: Run, decision: fx.Decision, effect: fx.Effect) -> None:
    match effect:
        case fx.DeployPreHealthCheck(stage=stage_name):
            clusters = next(s.clusters for s in decision.status.stages if s.name == stage_name)
            verification = _pre_verification_profile(run, stage_name)
            written = await _ensure_profile(ctx, run, verification, clusters)
            if written is not None:
                _pass_now(ctx, verification.name, written)
        case fx.RequestApproval(stage=stage_name):
            await ctx.event(
                run.obj, False, "ApprovalRequired", f"stage {stage_name} waits for manual approval"
            )
        case fx.Event():
            await common.emit(ctx, run.obj, effect)
        case _:
            pass  # Deliver/Withdraw are carried out level-triggered in `act`


async def _remove_finished_verifications(ctx: Context, run: Run, decision: fx.Decision) -> None:
    """A preHealthCheckDeployment lives only while its stage's after-gates are judged (kept when the
    stage failed, to look at). Level-triggered, not only on the RemovePreHealthCheck effect: a pass
    that decided from a cache older than our own status write may deploy it again after the stage
    succeeded, and nothing would ever remove it."""
    keep = (st.StagePhase.WAITING_AFTER, st.StagePhase.FAILED)
    for stage in decision.status.stages:
        trigger = _trigger(run.parsed, stage.name)
        if stage.phase in keep or trigger is None or not trigger.pre_health_check_deployment:
            continue
        name = translate.sveltos.pre_verification_name(run.parsed.metadata.name, stage.name)
        current = ctx.cache.get("ClusterProfile", None, name)
        if current is not None and not (current.get("metadata") or {}).get("deletionTimestamp"):
            await ops.delete_if_exists(ctx.client, ctx.resource("ClusterProfile"), name)


def _delivery_profile(run: Run, stage: st.StageStatus, pinned: tuple[str, str]) -> _StageProfile:
    """The stage's pinned content (snapshot name, hash); the promotion paces clusters, so no
    maxUpdate of its own. The stage's other clusters are held at what they run."""
    dumped = run.parsed.spec.profile_spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    return _StageProfile(
        name=stage_profile_name(run.parsed.metadata.name, stage.name),
        stage=stage.name,
        spec={k: v for k, v in dumped.items() if k != "maxUpdate"},
        annotations={
            common.PINNED_ANNOTATION: pinned[0],
            common.PINNED_HASH_ANNOTATION: pinned[1],
            common.HOLD_ANNOTATION: ",".join(sorted(stage.clusters)),
        },
    )


def _pre_verification_profile(run: Run, stage: str) -> _StageProfile:
    """The preHealthCheckDeployment payload: live content, not the pinned rollout."""
    trigger = _trigger(run.parsed, stage)
    refs = (trigger.pre_health_check_deployment or []) if trigger else []
    return _StageProfile(
        name=translate.sveltos.pre_verification_name(run.parsed.metadata.name, stage),
        stage=stage,
        spec={
            "policyRefs": [r.model_dump(mode="json", by_alias=True, exclude_none=True) for r in refs],
            "syncMode": "Continuous",
        },
        annotations={},
    )


def _pass_now(ctx: Context, profile: str, written: Any) -> None:
    """A stage profile's own change reaches its pass a moment later (`watches.STAGE_PROFILE_AHEAD`), the
    promotion having written its summaries ahead; when it did not, the pass is due as soon as the
    cache holds what was `written` (a pass before that would find the profile as it was): at once
    when its event came while the write was in flight, else when it comes."""
    version = written.metadata.resourceVersion
    cached = ctx.cache.get("ClusterProfile", None, profile)
    if cached is None or (cached.get("metadata") or {}).get("resourceVersion") != version:
        ctx.wakeups.expect_version(profile, version)
        return
    wake = ctx.wake("ClusterProfile", profile)
    if wake is not None:
        wake.call()


async def _deliver_stage(ctx: Context, run: Run, wanted: _StageProfile, clusters: tuple[str, ...]) -> None:
    """The stage profile with the clusters the engine started, and their summaries written ahead
    (`summary_writes.write_ahead`). A profile that exists and only gains clusters (or a new pin) is
    known before the API server answers — its uid, its spec — so both writes go at once: one
    management round trip per stage boundary instead of two in a row. A summary that arrives before
    its profile waits for it (`summary._standing`)."""
    body = _profile_body(ctx, run, wanted, clusters)
    if body is None:
        return
    ahead = None
    if len(clusters) <= summary_writes.WRITE_AHEAD_MAX:  # else nothing is written ahead: no prediction
        ahead = _as_stored(ctx.cache.get("ClusterProfile", None, wanted.name), body)
    if ahead is None:
        written = await _apply_profile(ctx, body)
        wrote_all = await summary_writes.write_ahead(ctx, written, run.resolved, clusters)
    else:
        profile = asyncio.ensure_future(_apply_profile(ctx, body))
        summaries = asyncio.ensure_future(summary_writes.write_ahead(ctx, ahead, run.resolved, clusters))
        try:
            written, wrote_all = await asyncio.gather(profile, summaries)
        except BaseException:
            # One failed: the other is not left writing behind a pass that is retried.
            profile.cancel()
            summaries.cancel()
            raise
    if not wrote_all:
        _pass_now(ctx, wanted.name, written)


def _as_stored(current: Mapping[str, Any] | None, body: Mapping[str, Any]) -> dict[str, Any] | None:
    """The stage profile as the API server will store `body`, from its cached version, when the write
    moves nothing but its clusterRefs and annotations; None for a new profile or any other change
    (schema defaults or a changed spec are the API server's to say)."""
    if current is None:
        return None
    meta = current.get("metadata") or {}
    spec = current.get("spec") or {}
    if not meta.get("uid") or meta.get("deletionTimestamp") or not isinstance(spec, Mapping):
        return None
    desired = _with_defaults(spec, body["spec"])
    if {k: v for k, v in desired.items() if k != "clusterRefs"} != {
        k: v for k, v in spec.items() if k != "clusterRefs"
    }:
        return None
    annotations = {**(meta.get("annotations") or {}), **body["metadata"]["annotations"]}
    # No resourceVersion: this content is no version the cache has seen (parses memoised by version).
    kept = {k: v for k, v in meta.items() if k != "resourceVersion"}
    return {**current, "metadata": {**kept, "annotations": annotations}, "spec": desired}


async def _ensure_profile(ctx: Context, run: Run, wanted: _StageProfile, clusters: tuple[str, ...]) -> Any:
    """Server-side apply the stage profile unless the cache shows it already as wanted; the profile
    as the API server stored it when it was written (else None)."""
    body = _profile_body(ctx, run, wanted, clusters)
    return None if body is None else await _apply_profile(ctx, body)


def _profile_body(
    ctx: Context, run: Run, wanted: _StageProfile, clusters: tuple[str, ...]
) -> dict[str, Any] | None:
    """The stage profile to apply; None when the cache shows it already as wanted."""
    spec = {**wanted.spec, "clusterRefs": [rf.cluster_ref(c, ctx.family) for c in sorted(clusters)]}
    current = ctx.cache.get("ClusterProfile", None, wanted.name)
    if (
        current is not None
        and current.get("spec") == _with_defaults(current.get("spec"), spec)
        and common.annotations_hold(current, wanted.annotations)
    ):
        return None
    promotion = run.parsed.metadata.name
    return {
        "apiVersion": ctx.api_version("ClusterProfile"),
        "kind": "ClusterProfile",
        "metadata": {
            "name": wanted.name,
            "labels": {PROMOTION_LABEL: promotion, STAGE_LABEL: wanted.stage},
            "annotations": dict(wanted.annotations),
            "ownerReferences": [common.owner_reference(ctx, KIND, run.obj)],
            "finalizers": _finalizers(current),
        },
        "spec": spec,
    }


def _finalizers(current: Mapping[str, Any] | None) -> list[str]:
    """The finalizer the profile controller would add in a write and a pass of its own (one per new
    stage profile, at a stage boundary), applied with the profile instead. Left out only for a
    profile being deleted that no longer has it: the API server refuses to add a finalizer to an
    object being deleted, and while it is still there, leaving it out would withdraw this field
    manager's claim and remove it (server-side apply)."""
    meta = (current or {}).get("metadata") or {}
    if meta.get("deletionTimestamp") and profile_withdrawal.FINALIZER not in (meta.get("finalizers") or []):
        return []
    return [profile_withdrawal.FINALIZER]


async def _apply_profile(ctx: Context, body: Mapping[str, Any]) -> Any:
    """Apply a stage profile; as the API server stored it. The summaries written with it judge
    themselves against that version until the profile's watch shows it, and those already waiting
    for it are woken now (`Wakeups.profile_written`)."""
    name = str(body["metadata"]["name"])
    stored = await tracked(
        ctx.echoes,
        ("ClusterProfile", name),
        KIND,
        ops.apply(ctx.client, body),
        lambda o: o.metadata.resourceVersion,
    )
    raw = as_dict(stored)
    # Slimmed as the informer keeps it, so parses of it are shared; a copy: `stored` is returned whole.
    waiting = ctx.wakeups.profile_written(name, slimmed({**raw, "metadata": dict(raw.get("metadata") or {})}))
    wake = ctx.queues.of("ClusterSummary")
    if wake is not None:
        for summary in waiting:
            wake(summary.key)
    return stored


def _with_defaults(current: Any, desired: Mapping[str, Any]) -> Any:
    """The desired spec as the API server stores it (schema defaults filled in from the current)."""
    if not isinstance(current, Mapping):
        return desired
    return {**{k: v for k, v in current.items() if k not in desired}, **desired}


async def _reset_approval(ctx: Context, promotion: ClusterPromotion, stage_name: str) -> None:
    index = next(i for i, s in enumerate(promotion.spec.stages) if s.name == stage_name)
    patch = [{"op": "replace", "path": f"/spec/stages/{index}/trigger/manual/approved", "value": False}]
    await ops.json_patch(ctx.client, ctx.resource(KIND), promotion.metadata.name, patch)


__all__ = ["PROMOTION_LABEL", "STAGE_LABEL", "reconcile", "stage_profile_name"]

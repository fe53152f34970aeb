"""ClusterSummary reconcile: deliver one profile's pinned content to one member cluster.

Reads the content snapshot the profile pinned (never the live ConfigMaps), applies resources by
server-side apply and helm charts with the real helm, prunes what left the content, checks readiness
and validateHealths (each after its featureID's feature, ADR 0113), and reports per feature
Provisioning / Provisioned / Failed. A finalizer makes deleting the summary withdraw what it
deployed (unless the profile said LeavePolicies).

Only summaries fleetwave made are delivered (ADR 0046): fleetwave's labels and name, a controller
reference to the live ClusterProfile (uid checked), a fleetwave content snapshot. Anything else is
ignored with a Warning Event and a status condition, never delivered, and never withdrawn on
deletion. A summary of ours that its profile no longer wants as it is (another pinned snapshot, a
cluster it no longer selects) waits for the profile to update or delete it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from fleetwave.api import conditions
from fleetwave.api.models import ClusterProfile
from fleetwave.api.sveltos import MAX_LIST, ClusterProfileSpec, HelmChart, ValidateHealth
from fleetwave.controllers.fleet import members, pull, tenancy
from fleetwave.controllers.fleet.boundary import content_boundary
from fleetwave.controllers.shared.context import Context, HelmOutcome, Wake, as_dict
from fleetwave.controllers.shared.echoes import tracked
from fleetwave.controllers.shared.keys import SummaryKey
from fleetwave.controllers.shared.status_writer import Whose
from fleetwave.controllers.shared.versioned_memo import VersionedMemo
from fleetwave.controllers.sveltos import (
    content,
    dry_run_report,
    registry_credentials,
    summary_health,
    summary_pull,
    templated_content,
)
from fleetwave.controllers.sveltos import rollout_common as common
from fleetwave.controllers.sveltos import summary_drift as drift_detection
from fleetwave.controllers.sveltos import summary_status as ss
from fleetwave.controllers.sveltos.summary_memory import SummaryMemory
from fleetwave.core import model as m
from fleetwave.core import selectors, timestamps
from fleetwave.delivery import content as dc
from fleetwave.delivery import manifests, sessions
from fleetwave.delivery.helmplan import Ownership
from fleetwave.delivery.known_versions import KnownVersions
from fleetwave.delivery.registry import RegistryError
from fleetwave.delivery.target import MemberTarget, MemberUnreachable
from fleetwave.kube import internals, kinds, ops
from fleetwave.kube.status import StatusWrite, Versioned, version_written
from fleetwave.runtime.controller import Result

log = logging.getLogger(__name__)

UNREACHABLE_RETRY = 5.0
PROBE_TIMEOUT = 5.0
PROBE_FRESH = 5.0
# Seconds between re-checks of a summary waiting on its profile's next event or write (`Wakeups`):
# the net for a watch that is down. Rate-limited retries instead (5 ms, doubling) spun about seven
# times while a promotion's profile write took 0.7 s under load.
PROFILE_WAIT_NET = 30.0


def inventory(namespace: str, name: str) -> str:
    return f"summary/{namespace}/{name}"


def owner_of(raw: Mapping[str, Any]) -> str:
    """Who a summary deploys for: its ClusterProfile. Conflicts are between profiles, so two
    registrations of one cluster under one profile share what they deploy (ADR 0066)."""
    profile = ((raw.get("metadata") or {}).get("labels") or {}).get(ss.PROFILE_LABEL)
    return (
        f"ClusterProfile/{profile}"
        if profile
        else inventory(raw["metadata"]["namespace"], raw["metadata"]["name"])
    )


async def reconcile(ctx: Context, memory: SummaryMemory, key: str) -> Result:
    namespace, _, name = key.partition("/")
    obj = ctx.cache.obj("ClusterSummary", namespace, name)
    if obj is None:
        return Result()
    raw = as_dict(obj)
    meta = raw["metadata"]
    if ctx.statuses.behind(Whose("ClusterSummary", key), meta.get("resourceVersion")):
        # The cache does not show our last status write yet: its event wakes us (the timer is a
        # safety net for a watch that is down).
        return Result(requeue_after=1.0)
    if meta.get("deletionTimestamp"):
        return await _finalize(ctx, memory, obj, raw)
    foreign, stale = _standing(ctx, raw)
    if foreign:
        return await _ignore(ctx, obj, raw, foreign)
    if stale:
        # Its profile's next event, or a promotion's write of it, wakes it (a promotion writes a stage
        # profile and its summaries at once, and the summary's event may come first).
        log.debug("ClusterSummary %s waits for its profile: %s", key, stale)
        profile = str(meta["labels"][ss.PROFILE_LABEL])
        if ctx.cache.get("ClusterProfile", None, profile) is None:
            return Result(requeue=True)  # one gone has no next event: retried with backoff until GC
        ctx.wakeups.await_profile(profile, SummaryKey.parse(key))
        return Result(requeue_after=PROFILE_WAIT_NET, poll=True)
    if ss.FINALIZER not in (meta.get("finalizers") or []):
        await _patch_meta(
            ctx, namespace, name, {"finalizers": [*(meta.get("finalizers") or []), ss.FINALIZER]}
        )
        return Result(requeue=True)
    wanted = str((meta.get("annotations") or {}).get(ss.CONTENT_HASH_ANNOTATION, ""))
    if ss.gave_up(raw.get("status") or {}, content_hash=wanted, generation=meta.get("generation")):
        return Result()  # maxConsecutiveFailures reached: a new revision or a spec edit wakes us
    if pull.is_pull_member(ctx, summary_pull.cluster_of(raw)):
        return await summary_pull.reconcile(ctx, key, obj, raw, wanted, _content)
    raw = _as_last_decided(memory, key, raw, wanted)
    inputs = _template_inputs(ctx, raw)
    same_target = _same_target(ctx, memory, key, raw)
    if settled(raw, wanted, same_target=same_target, template_inputs=inputs) == "done":
        # Deployed and healthy at this revision and generation: nothing to write, nothing to ask the
        # member (our own status write wakes us, and work must not grow with the fleet's size).
        return Result()
    return await _deliver_and_report(ctx, memory, key, obj, raw, wanted)


async def _deliver_and_report(
    ctx: Context, memory: SummaryMemory, key: str, obj: Any, raw: Mapping[str, Any], wanted: str
) -> Result:
    """Deliver the content, then report how it went in status (and a Warning Event when it failed)."""
    meta = raw["metadata"]
    outcome = await _deliver(ctx, memory, raw)
    limit = ((raw.get("spec") or {}).get("clusterProfileSpec") or {}).get("maxConsecutiveFailures")
    status = ss.status_body(
        outcome,
        generation=meta.get("generation"),
        now=ctx.clock(),
        previous=raw.get("status") or {},
        max_failures=int(limit) if limit else None,
    )
    unwritten = _unwritten_for(ctx, memory, key, raw, outcome, status, wanted)
    if unwritten:
        return Result(requeue_after=min(unwritten, ctx.judge_poll))
    held = _progress_held_back(ctx, key, raw.get("status") or {}, status)
    if held is not None:
        return Result(requeue_after=min(held, ctx.judge_poll))
    kind = "ClusterSummary"
    write = ctx.write_status(kind, Versioned.of_cached(obj), status)
    written, _ = await tracked(ctx.echoes, (kind, key), kind, write, version_written)
    if written is StatusWrite.CONFLICT:
        return Result(requeue=True)
    if written is StatusWrite.WRITTEN and outcome.failed:
        await ctx.event(obj, True, "DeliveryFailed", status.get("failureMessage") or outcome.failed)
    await dry_run_report.publish(ctx, raw, outcome)
    if ss.gave_up(status, content_hash=wanted, generation=meta.get("generation")):
        return Result()
    return requeue_for(ctx, raw, outcome)


def _as_last_decided(memory: SummaryMemory, key: str, raw: dict[str, Any], wanted: str) -> dict[str, Any]:
    """`raw` with the status this process decided for this version of it and has not written yet
    (`summary_pending`): a revision applied whose health is pending is judged, not applied again."""
    unwritten = memory.pending.status_of(SummaryKey.parse(key), raw, wanted)
    return raw if unwritten is None else {**raw, "status": unwritten}


def _unwritten_for(
    ctx: Context,
    memory: SummaryMemory,
    key: str,
    raw: Mapping[str, Any],
    outcome: ss.Outcome,
    status: Mapping[str, Any],
    wanted: str,
) -> float:
    """Seconds `status` stays unwritten (0: write it now): the first news of a revision applied whose
    health is pending, for up to `summary_pending.UNWRITTEN_FOR` (ADR 0130). A verdict is written at
    once, and so is anything after which the next pass would apply again."""
    summary_key, pending = SummaryKey.parse(key), memory.pending
    holding = pending.status_of(summary_key, raw, wanted) is not None
    verdict = outcome.healthy or outcome.failed or outcome.unreachable or outcome.waiting or outcome.dry_run
    news = holding or (raw.get("status") or {}).get("observedContentHash") != wanted
    if verdict or not news or not _judged_next(ctx, memory, key, {**raw, "status": status}, wanted):
        pending.release(summary_key)
        return 0.0
    return pending.hold(summary_key, raw, wanted, status)


def _judged_next(
    ctx: Context, memory: SummaryMemory, key: str, decided: Mapping[str, Any], wanted: str
) -> bool:
    """Whether the summary's next pass, reading `decided`, only judges health (applies nothing)."""
    inputs = _template_inputs(ctx, decided)
    same_target = _same_target(ctx, memory, key, decided)
    return settled(decided, wanted, same_target=same_target, template_inputs=inputs) == "judge"


def _progress_held_back(
    ctx: Context, key: str, previous: Mapping[str, Any], status: Mapping[str, Any]
) -> float | None:
    """Seconds until a progress-only status change is due (None: write it now). A summary whose
    status this process wrote within PROGRESS_EVERY seconds keeps its last message until then,
    unless the judgement's verdict changes (ADR 0068)."""
    return ctx.progress_due_in("ClusterSummary", key) if ss.progress_only(previous, status) else None


NOT_OURS = "NotCreatedByFleetwave"


def _standing(ctx: Context, raw: Mapping[str, Any]) -> tuple[str, str]:
    """(why the summary is not fleetwave's, why its profile does not want it as it is); "" when fine."""
    problem = ss.foreign(raw, owner_api_version=ctx.api_version("ClusterProfile"))
    if problem:
        return problem, ""
    meta = raw["metadata"]
    profile = str(meta["labels"][ss.PROFILE_LABEL])
    # A stage profile a promotion wrote with this summary is judged as written, not as the cache
    # still shows it (or does not show it yet): the profile's watch may run seconds behind under load
    # (`Wakeups`).
    owner = ctx.wakeups.as_written(profile, ctx.cache.get("ClusterProfile", None, profile))
    if owner is None:
        # Its profile was deleted (garbage collection deletes the summary next, and the finalizer
        # withdraws what it delivered), or never existed (then GC deletes it as well): no delivery.
        return "", f"ClusterProfile {profile} does not exist"
    problem = ss.foreign(
        raw, profile, (owner.get("metadata") or {}).get("uid"), ctx.api_version("ClusterProfile")
    )
    if problem:
        return problem, ""
    annotations = meta.get("annotations") or {}
    snapshot = str(annotations.get(ss.CONTENT_ANNOTATION) or "")
    if not content.is_snapshot_name(snapshot):
        return f"annotation {ss.CONTENT_ANNOTATION} does not name a fleetwave content snapshot", ""
    pinned = ((owner.get("metadata") or {}).get("annotations") or {}).get(common.PINNED_ANNOTATION)
    if pinned and snapshot != pinned:
        return "", f"its content is not the snapshot ClusterProfile {profile} pins"
    if not _selected(ctx, owner, raw.get("spec") or {}):
        return "", f"ClusterProfile {profile} does not select its cluster"
    return "", ""


def _selected(ctx: Context, owner: Mapping[str, Any], spec: Mapping[str, Any]) -> bool:
    """Whether the owner selects the summary's cluster now (the profile's own matching rule, its
    cluster sets' choice included)."""
    names = ((owner.get("spec") or {}).get("setRefs")) or ()
    chosen = common.set_clusters(ctx.cache, [str(n) for n in names] if isinstance(names, list) else ())
    valid, selector = _SELECTORS.get(owner, chosen, lambda o: _selector_of(ctx, o))
    if not valid:
        return True  # the profile reports its invalid spec itself; it does not withdraw for it
    fleet = common.fleet_of(ctx.cache)
    cluster = fleet.by_name.get(ss.cluster_of(spec))
    return cluster is None or selectors.matches(selector, cluster.labels)


def _selector_of(ctx: Context, profile: Mapping[str, Any]) -> tuple[bool, m.Selection | None]:
    """Whether the profile's spec is valid, and what selects its clusters."""
    try:
        parsed = common.parse_as(profile, "ClusterProfile", ClusterProfile)
        return True, common.profile_rollout(ctx.cache, parsed).stages[0].selector
    except common.INVALID:
        return False, None


# A summary judges its profile's selector at every pass: derived once per version of the profile
# and choice of its cluster sets.
_SELECTORS: VersionedMemo[tuple[bool, m.Selection | None]] = VersionedMemo(4096)


async def _ignore(ctx: Context, obj: Any, raw: Mapping[str, Any], problem: str) -> Result:
    """Say (once, in status and a Warning Event) that the summary is not delivered, and why."""
    message = f"ignored, nothing is delivered: not created by fleetwave ({problem})"
    previous = raw.get("status") or {}
    old = conditions.get(previous, "Ready")
    since = old.get("lastTransitionTime") if old.get("reason") == NOT_OURS else None
    condition = {
        "type": "Ready",
        "status": "False",
        "reason": NOT_OURS,
        "message": message,
        "lastTransitionTime": since or timestamps.fmt(ctx.clock()),
        "observedGeneration": raw["metadata"].get("generation"),
    }
    # Only the condition changes: a summary that was delivered before keeps the record of what it
    # deployed (withdrawing on deletion is decided separately, see `_ours_to_withdraw`).
    status = {**previous, "conditions": [condition], "failureMessage": message}
    written, _ = await ctx.write_status("ClusterSummary", Versioned.of(obj), status)
    if written is StatusWrite.CONFLICT:
        return Result(requeue=True)
    if written is StatusWrite.WRITTEN:
        log.warning(
            "ClusterSummary %s/%s %s", raw["metadata"].get("namespace"), raw["metadata"]["name"], message
        )
        await ctx.event(obj, True, NOT_OURS, message)
    return Result()  # an edit wakes us


def settled(
    raw: Mapping[str, Any], wanted_hash: str, *, same_target: bool = True, template_inputs: str | None = None
) -> str:
    """How far this summary got with what it wants now: "deliver" (apply the content), "judge" (it is
    deployed, only its health is pending) or "done" (deployed and healthy). DryRun and drift
    detection always deliver; OneTime content counts as deployed whatever revision it was.
    Continuous content is delivered again when this process has not delivered it to the cluster's
    present credentials (a re-registered or rebuilt cluster, or a controller restart)."""
    mode = ((raw.get("spec") or {}).get("clusterProfileSpec") or {}).get("syncMode") or "Continuous"
    previous = raw.get("status") or {}
    if mode not in ("Continuous", "OneTime") or not _provisioned(previous):
        return "deliver"
    if mode == "Continuous" and not same_target:
        return "deliver"
    if (
        mode == "Continuous"
        and template_inputs is not None
        and template_inputs != previous.get("templateInputsHash")
    ):
        return "deliver"  # templated content rendered for a cluster that has changed since
    same_revision = previous.get("observedContentHash") == wanted_hash
    if mode == "Continuous" and not same_revision:
        return "deliver"
    ready = conditions.get(previous, "Ready")
    if ready.get("observedGeneration") != raw["metadata"].get("generation"):
        return "judge" if mode == "OneTime" else "deliver"  # a spec edit (e.g. its checks)
    if ready.get("status") == "True" and same_revision:
        return "done"
    return "judge" if ready.get("reason") == "Unhealthy" or mode == "OneTime" else "deliver"


def _template_inputs(ctx: Context, raw: Mapping[str, Any]) -> str | None:
    """The cluster's fingerprint now, when the summary's content was rendered for it (else None)."""
    if not (raw.get("status") or {}).get("templateInputsHash"):
        return None
    cluster = _cluster_object(ctx, raw.get("spec") or {})
    return None if cluster is None else templated_content.inputs_fingerprint(cluster)


def _cluster_object(ctx: Context, spec: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The object of the summary's cluster: its MemberCluster, or its Cluster API Cluster."""
    return members.member_object(ctx.cache, ss.cluster_of(spec), with_capi=members.with_capi(ctx.cache))


def fingerprint(target: MemberTarget) -> str:
    return hashlib.sha256(target.kubeconfig).hexdigest()


def _same_target(ctx: Context, memory: SummaryMemory, key: str, raw: Mapping[str, Any]) -> bool:
    """Whether this process last delivered the summary to the cluster's present credentials."""
    target, _ = _target(ctx, raw)
    return target is not None and memory.delivered_with(SummaryKey.parse(key), fingerprint(target))


def requeue_for(ctx: Context, raw: Mapping[str, Any], outcome: ss.Outcome) -> Result:
    if outcome.unreachable:
        return Result(requeue_after=UNREACHABLE_RETRY)
    if outcome.failed:
        # Retried with per-key exponential backoff (up to 5 min): content may start working (a CRD
        # arrives), but a chart with bad values must not churn helm revisions every few seconds.
        return Result(requeue=True)
    if not outcome.healthy and not outcome.dry_run:
        return Result(requeue_after=ctx.judge_poll)  # the safety net under member watches
    if (raw.get("spec") or {}).get("clusterProfileSpec", {}).get(
        "syncMode"
    ) == "ContinuousWithDriftDetection":
        return Result(requeue_after=drift_detection.poll_after(ctx, SummaryKey.of(raw).key))
    return Result()


def _target(ctx: Context, raw: Mapping[str, Any]) -> tuple[MemberTarget | None, str]:
    """The member to deliver to, acting as the summary's tenant admin when its profile names one
    (ADR 0111)."""
    cluster = ss.cluster_of(raw.get("spec") or {})
    member = members.lookup(ctx.cache, cluster, with_capi=members.with_capi(ctx.cache))
    if member is None:
        return None, f"cluster {cluster} is not registered"
    found = members.credentials(ctx.cache, member)
    if found.kubeconfig is None:
        return None, f"cluster {member.key}: {found.message}"
    admin = tenancy.admin_of((raw.get("metadata") or {}).get("labels"))
    if isinstance(admin, str):
        return None, admin
    kubeconfig = found.kubeconfig
    if admin is not None:
        kubeconfig = tenancy.acting_as(kubeconfig, admin, allow_insecure=member.allow_insecure)
    return MemberTarget(
        member.key, kubeconfig, allow_insecure=member.allow_insecure, tenant=str(admin or "")
    ), ""


async def _deliver(ctx: Context, memory: SummaryMemory, raw: Mapping[str, Any]) -> ss.Outcome:
    spec = raw.get("spec") or {}
    wanted_hash = str((raw["metadata"].get("annotations") or {}).get(ss.CONTENT_HASH_ANNOTATION, ""))
    profile = ClusterProfileSpec.model_validate(spec.get("clusterProfileSpec") or {})
    target, problem = _target(ctx, raw)
    if target is None:
        return ss.Outcome(wanted_hash, unreachable=problem)
    found = await _content(ctx, raw, wanted_hash)
    if isinstance(found, ss.Outcome):
        return found
    body, rendered_for = found
    outcome = await deliver_body(ctx, memory, raw, target, profile, body, wanted_hash)
    return dataclasses.replace(outcome, template_inputs=rendered_for) if rendered_for else outcome


async def _content(
    ctx: Context, raw: Mapping[str, Any], wanted_hash: str
) -> tuple[dict[str, Any], str] | ss.Outcome:
    """The pinned content as this cluster gets it, with the fingerprint it was rendered for; or the
    outcome that says why there is none to deliver."""
    annotations = raw["metadata"].get("annotations") or {}
    try:
        body = content.read_snapshot(ctx.cache, ctx.namespace, str(annotations.get(ss.CONTENT_ANNOTATION)))
    except content.ContentError as e:
        return ss.Outcome(wanted_hash, (ss.Feature(ss.FEATURE_RESOURCES, "Failed", "", str(e)),))
    if body is None:
        return ss.Outcome(wanted_hash, health_message="waiting for the content snapshot")
    try:
        return await _for_cluster(ctx, raw.get("spec") or {}, body)
    except templated_content.InstantiationError as e:
        return ss.Outcome(wanted_hash, (ss.Feature(_feature_of(body), "Failed", "", str(e)),))


async def deliver_body(
    ctx: Context,
    memory: SummaryMemory,
    raw: Mapping[str, Any],
    target: MemberTarget,
    profile: ClusterProfileSpec,
    body: Mapping[str, Any],
    wanted_hash: str,
) -> ss.Outcome:
    """Deliver `body` to `target` as the summary `raw` asks (the controller for push members, the
    member's agent for pull members, ADR 0106)."""
    previous = raw.get("status") or {}
    dry_run = profile.sync_mode == "DryRun"
    key = f"{raw['metadata']['namespace']}/{raw['metadata']['name']}"
    wake = ctx.wake("ClusterSummary", key)
    try:
        await _probe(target)
        same_target = memory.delivered_with(SummaryKey.of(raw), fingerprint(target))
        inputs = _template_inputs(ctx, raw)
        if settled(raw, wanted_hash, same_target=same_target, template_inputs=inputs) == "judge":
            return await _health_only(ctx, target, profile, body, wanted_hash, previous, wake, owner_of(raw))
        waiting = await _pre_deploy(ctx, target, profile, previous, wanted_hash, dry_run, wake, owner_of(raw))
        if waiting:
            # Nothing is deployed: the summary keeps what it last delivered, and says why it waits.
            return ss.Outcome(str(previous.get("observedContentHash") or ""), waiting=waiting)
        outcome = await _deliver_to(ctx, memory, target, raw, profile, body, wanted_hash, dry_run)
        if not outcome.failed and not dry_run:
            memory.delivered(SummaryKey.of(raw), fingerprint(target))
        return outcome
    except MemberUnreachable as e:
        return ss.Outcome(wanted_hash, unreachable=str(e))


async def _for_cluster(
    ctx: Context, spec: Mapping[str, Any], body: dict[str, Any]
) -> tuple[dict[str, Any], str]:
    """The snapshot as this cluster gets it: templates rendered, kustomizations built (ADR 0089); with
    the fingerprint of the cluster it was rendered for ("" when nothing is templated)."""
    if not templated_content.needs_instantiation(body):
        return body, ""
    cluster = _cluster_object(ctx, spec)
    if cluster is None:
        raise templated_content.InstantiationError("the cluster is not registered")
    rendered = await templated_content.instantiate(
        body,
        cluster=cluster,
        lookup=ctx.cache,
        boundary=content_boundary(ctx),
        tools=templated_content.Tools(ctx.renderer, ctx.kustomizer),
    )
    return rendered, templated_content.inputs_fingerprint(cluster)


def _feature_of(body: Mapping[str, Any]) -> str:
    """Where a content failure shows: Kustomize, Resources, or Helm when only charts are templated."""
    policies = body.get("policies") or []
    if any("kustomize" in p for p in policies):
        return ss.FEATURE_KUSTOMIZE
    return ss.FEATURE_RESOURCES if policies or body.get("patches") else ss.FEATURE_HELM


async def _pre_deploy(
    ctx: Context,
    target: MemberTarget,
    profile: ClusterProfileSpec,
    previous: Mapping[str, Any],
    wanted_hash: str,
    dry_run: bool,
    wake: Wake | None,
    owner: str,
) -> str:
    """Why the content must not be deployed yet ("" to go on): preDeployChecks are judged on the
    cluster before each revision is first deployed there (once it is, they are not asked again)."""
    if not profile.pre_deploy_checks or dry_run:
        return ""
    if previous.get("observedContentHash") == wanted_hash and _provisioned(previous):
        return ""
    verdict = await ctx.health.check(target, profile.pre_deploy_checks, objects=(), wake=wake, owner=owner)
    return "" if verdict.ok else f"waiting for preDeployChecks, nothing is deployed: {verdict.message}"


async def _probe(target: MemberTarget) -> None:
    """Fail fast on a member that does not answer: helm and watches would otherwise hang for minutes.
    A member whose pooled client answered within PROBE_FRESH seconds is not asked again (a request on
    every stage's critical path); one that died since fails its next request instead, within the
    client's timeout."""
    if sessions.pool().answered_within(target.pool_key(), PROBE_FRESH):
        return
    # The member kubeconfig policy runs first (in `session`): nothing it refuses is run or read.
    # The pooled client's connection is reused: a probe costs one request, not a TLS handshake.
    try:
        async with target.session() as client:
            response = await internals.raw_http(client).get("/readyz", timeout=PROBE_TIMEOUT)
    except (ops.HTTPError, OSError) as e:
        raise MemberUnreachable(target.name, f"{type(e).__name__}: {e or 'no answer'}") from e
    if response.status_code != 200:
        raise MemberUnreachable(
            target.name, f"API server not ready (/readyz answered {response.status_code})"
        )


def _provisioned(status: Mapping[str, Any]) -> bool:
    features = status.get("featureSummaries") or []
    return (
        bool(status.get("observedContentHash"))
        and bool(features)
        and all(ss.carried_status(status, f) == "Provisioned" for f in features)
    )


def _objects(body: Mapping[str, Any], tier: int = manifests.DEFAULT_TIER) -> list[dict[str, Any]]:
    """The snapshot's objects, each annotated with its (profile tier, policyRef tier) when not the
    default: who wins when another profile deploys the same object (ADR 0063)."""
    return [
        manifests.with_tier(o, (tier, int(p.get("tier") or manifests.DEFAULT_TIER)))
        for p in body.get("policies") or []
        if p.get("deploymentType") != content.LOCAL  # the management cluster's (local_content.py)
        for o in p.get("objects") or []
    ]


def _apply_policy(profile: ClusterProfileSpec) -> manifests.ApplyPolicy:
    return manifests.ApplyPolicy(
        stop_on_error=not profile.continue_on_error, stop_on_conflict=not profile.continue_on_conflict
    )


def _ids(objects: list[dict[str, Any]]) -> list[tuple[str, str, str | None, str]]:
    return [
        (o["apiVersion"], o["kind"], (o.get("metadata") or {}).get("namespace"), o["metadata"]["name"])
        for o in objects
    ]


async def _health_only(
    ctx: Context,
    target: MemberTarget,
    profile: ClusterProfileSpec,
    body: Mapping[str, Any],
    wanted_hash: str,
    previous: Mapping[str, Any],
    wake: Wake | None,
    owner: str,
) -> ss.Outcome:
    """Deployed already: only health is judged, nothing is re-applied while it is unhealthy.

    OneTime: a later revision counts as delivered, it promises not to change the cluster again
    (ADR 0035). What was deployed (features, kinds, helm releases) is carried over as it was.
    """
    features, releases = ss.carried(previous)
    health = await summary_health.judge(
        ctx, target, profile.validate_healths, features, objects=_ids(_objects(body)), wake=wake, owner=owner
    )
    if profile.sync_mode == "OneTime":
        note = "; OneTime: deployed once, later changes are not applied"
        health = dataclasses.replace(health, message=health.message + note)
    return _judged(ss.Outcome(wanted_hash, features, releases), health)


async def _deliver_to(
    ctx: Context,
    memory: SummaryMemory,
    target: MemberTarget,
    raw: Mapping[str, Any],
    profile: ClusterProfileSpec,
    body: Mapping[str, Any],
    wanted_hash: str,
    dry_run: bool,
) -> ss.Outcome:
    key = SummaryKey.of(raw)
    inv, owner = inventory(key.namespace, key.name), owner_of(raw)
    previous = raw.get("status") or {}
    objects = _objects(body, profile.tier)
    since, drift = drift_detection.began(ctx), await _drift(target, profile, objects, inv, owner)
    resources, applied, tried = await _resources(
        target,
        objects,
        key,
        previous,
        dry_run,
        _apply_policy(profile),
        owner,
        memory,
        ctx.known_versions,
        created=timestamps.parse_optional((raw.get("metadata") or {}).get("creationTimestamp")),
    )
    # Releases installed before owners were profiles carry the summary's own key: still ours.
    ownership = Ownership(dc.inventory_key(owner), profile.tier, formerly=(dc.inventory_key(inv),))
    charts = body.get("helmCharts") or []
    releases = await _charts(ctx, target, charts, previous, dry_run, profile.continue_on_error, ownership)
    drift += await drift_detection.settle(ctx, key.key, target, profile, (_ids(objects), releases), since)
    features = _features(body, objects, resources, releases)
    outcome = ss.Outcome(wanted_hash, features, tuple(releases), dry_run=dry_run, drift=drift)
    if dry_run:  # what would change, per object and release: the cluster's ClusterReport (ADR 0113)
        return await dry_run_report.preview(outcome, target, body, tried, inv, _previous_kinds(previous))
    if outcome.failed:
        return outcome
    # Judged on the objects as their applies returned them, unless charts were installed since
    # (that can take long enough for what the applies returned to be old news).
    seen = applied if not charts else None
    return _judged(outcome, await _judge_delivered(ctx, target, profile, outcome, objects, key, seen, owner))


async def _judge_delivered(
    ctx: Context,
    target: MemberTarget,
    profile: ClusterProfileSpec,
    outcome: ss.Outcome,
    objects: list[dict[str, Any]],
    key: SummaryKey,
    seen: Mapping[tuple[str, str, str | None, str], Mapping[str, Any]] | None,
    owner: str,
) -> summary_health.Verdict:
    """Health right after a delivery, each check after its feature (ADR 0113)."""
    return await summary_health.judge(
        ctx,
        target,
        profile.validate_healths,
        outcome.features,
        objects=_ids(objects),
        wake=ctx.wake("ClusterSummary", key.key),
        seen=seen,
        delivered=True,
        owner=owner,
    )


def _judged(outcome: ss.Outcome, health: summary_health.Verdict) -> ss.Outcome:
    return dataclasses.replace(
        outcome, healthy=health.ok, health_message=health.message, health_feature=health.feature
    )


async def _drift(
    target: MemberTarget, profile: ClusterProfileSpec, objects: list[dict[str, Any]], inv: str, owner: str
) -> tuple[str, ...]:
    """How the cluster's objects differ from the content, when the profile asks to detect drift."""
    if profile.sync_mode != "ContinuousWithDriftDetection" or not objects:
        return ()
    found = await manifests.detect_drift(target, objects, inventory=inv, owner=owner)
    return tuple(f"{d.ref}: {d.reason}" for d in found)


def _features(
    body: Mapping[str, Any],
    objects: list[dict[str, Any]],
    resources: ss.Feature,
    releases: list[ss.HelmRelease],
) -> tuple[ss.Feature, ...]:
    """What a delivery reports per feature: Resources, Kustomize and Helm, each where it has content."""
    features = [resources] if objects or resources.deployed else []
    if any(p.get("feature") == ss.FEATURE_KUSTOMIZE for p in body.get("policies") or []):
        # Kustomize output is applied with the other resources (one inventory, pruned together), so
        # its feature reports that same apply.
        features.append(ss.Feature(ss.FEATURE_KUSTOMIZE, resources.status, resources.hash, resources.message))
    if body.get("helmCharts") or releases:
        features.append(_helm_feature(releases, body))
    return tuple(features)


async def _resources(
    target: MemberTarget,
    objects: list[dict[str, Any]],
    key: SummaryKey,
    previous: Mapping[str, Any],
    dry_run: bool,
    policy: manifests.ApplyPolicy,
    owner: str,
    memory: SummaryMemory,
    known: KnownVersions,
    *,
    created: datetime | None = None,
) -> tuple[
    ss.Feature, dict[tuple[str, str, str | None, str], Mapping[str, Any]], manifests.ApplyReport | None
]:
    """The resources feature, the objects as their applies returned them, and the apply's report.
    `created`: the summary's creationTimestamp (a summary nobody delivered before is not searched
    for leftovers, ADR 0121)."""
    before, inv = _previous_kinds(previous), inventory(key.namespace, key.name)
    refused = None if dry_run else await _tenant_refusal(target, objects, inv, policy, owner)
    if refused is not None:
        return refused, {}, None
    alone = not dry_run and memory.first_alone(key, created)
    report = await manifests.apply(
        target, objects, inventory=inv, dry_run=dry_run, policy=policy, owner=owner, known=known
    )
    if not report.ok:
        failed = ss.Feature(ss.FEATURE_RESOURCES, "Failed", report.content_hash, "; ".join(report.errors))
        return failed, {}, report
    if not dry_run:
        await _prune(tenancy.as_controller(target), memory, key, report, before, alone=alone)
    deployed = tuple(sorted({ss.gvk_string(g.api_version, g.kind) for g in report.kinds}))
    provisioned = ss.Feature(ss.FEATURE_RESOURCES, "Provisioned", report.content_hash, deployed=deployed)
    return provisioned, report.live, report


async def _prune(
    target: MemberTarget,
    memory: SummaryMemory,
    key: SummaryKey,
    report: manifests.ApplyReport,
    before: set[kinds.GVK],
    *,
    alone: bool,
) -> None:
    """Search what the summary's earlier deliveries left behind and delete it, unless nothing can
    have been (its first delivery by anyone, or the same objects as this process pruned to before).
    `target` acts as fleetwave: the search lists across namespaces, a tenant may read only its own."""
    kinds_, inv = before | report.kinds, inventory(key.namespace, key.name)
    if alone:
        manifests.nothing_left_behind(target, memory.prunes, key, kinds=kinds_, keep=report.refs)
        return
    await manifests.prune_unless_done(
        target, memory.prunes, key, inventory=inv, kinds=kinds_, keep=report.refs
    )


async def _tenant_refusal(
    target: MemberTarget, objects: list[dict[str, Any]], inv: str, policy: manifests.ApplyPolicy, owner: str
) -> ss.Feature | None:
    """A tenant's content is tried whole first (server-side dry run, as the tenant): what its rules
    refuse fails the feature before anything of it is applied (ADR 0111). None: go ahead."""
    if not target.tenant:
        return None
    tried = await manifests.apply(target, objects, inventory=inv, dry_run=True, policy=policy, owner=owner)
    if tried.ok:
        return None
    why = f"refused for tenant admin {target.tenant}: " + "; ".join(tried.errors)
    return ss.Feature(ss.FEATURE_RESOURCES, "Failed", tried.content_hash, why)


def _previous_kinds(previous: Mapping[str, Any]) -> set[kinds.GVK]:
    gvks = [
        g
        for d in previous.get("deployedGVKs") or []
        if d.get("featureID") == ss.FEATURE_RESOURCES
        for g in d.get("deployedGroupVersionKind") or []
    ]
    return {kinds.GVK(api_version, kind) for api_version, kind in ss.deployed_kinds(gvks)}


async def _charts(
    ctx: Context,
    target: MemberTarget,
    charts: list[Mapping[str, Any]],
    previous: Mapping[str, Any],
    dry_run: bool,
    continue_on_error: bool = False,
    ownership: Ownership | None = None,
) -> list[ss.HelmRelease]:
    releases: list[ss.HelmRelease] = []
    wanted = set()
    stopped = ""
    for entry in charts:
        chart = HelmChart.model_validate(entry["chart"])
        wanted.add((chart.release_name, chart.release_namespace))
        if stopped:
            releases.append(
                ss.HelmRelease(chart.release_name, chart.release_namespace, "Failed", message=stopped)
            )
            continue
        outcome = await _chart(ctx, target, entry, chart, dry_run, ownership)
        releases.append(_release(chart.release_name, chart.release_namespace, outcome))
        if not outcome.ok and not continue_on_error:
            failed = f"{chart.release_namespace}/{chart.release_name}"
            stopped = f"not deployed: {failed} failed before it (continueOnError is false)"
    for old in previous.get("helmReleaseSummaries") or []:  # charts removed from the profile
        key = (old.get("releaseName"), old.get("releaseNamespace"))
        if key not in wanted and not dry_run and old.get("status") != "Uninstalled":
            # Only status names it, and others can write status: only a release labelled ours goes.
            owner = ownership.owners() if ownership else None
            await ctx.helm.uninstall(
                target, release=str(key[0]), namespace=str(key[1]), owner=owner, owned_only=True
            )
    return releases


async def _chart(
    ctx: Context,
    target: MemberTarget,
    entry: Mapping[str, Any],
    chart: HelmChart,
    dry_run: bool,
    ownership: Ownership | None,
) -> HelmOutcome:
    """One chart installed, upgraded or uninstalled; its registry's Secrets are read now, from the
    cache and within the content boundary (ADR 0105), and a refusal is this release's failure."""
    if chart.helm_chart_action == "Uninstall":
        if dry_run:  # reported, never done
            return HelmOutcome(
                True, "Uninstalled", chart.chart_version or "", action=dry_run_report.UNINSTALL
            )
        owner = ownership.owners() if ownership else None
        return await ctx.helm.uninstall(
            target, release=chart.release_name, namespace=chart.release_namespace, owner=owner
        )
    try:
        access = registry_credentials.access(chart, ctx.cache, content_boundary(ctx))
    except RegistryError as e:
        return HelmOutcome(False, "Failed", chart.chart_version or "", message=str(e))
    return await ctx.helm.install_or_upgrade(
        target,
        chart,
        values=entry.get("values") or {},
        dry_run=dry_run,
        ownership=ownership,
        access=access,
        patches=entry.get("patches") or (),
    )


def _release(name: str, namespace: str, outcome: HelmOutcome) -> ss.HelmRelease:
    return ss.HelmRelease(
        name,
        namespace,
        outcome.status,
        outcome.values_hash,
        outcome.chart_version,
        "" if outcome.ok else outcome.message,
        outcome.action,
        outcome.installed_version,
        outcome.resources,
    )


def _helm_feature(releases: list[ss.HelmRelease], body: Mapping[str, Any]) -> ss.Feature:
    digest = hashlib.sha256(dc.canonical_json(list(body.get("helmCharts") or [])).encode()).hexdigest()
    failed = [
        f"{r.release_namespace}/{r.release_name}: {r.message}" for r in releases if r.status == "Failed"
    ]
    if failed:
        return ss.Feature(ss.FEATURE_HELM, "Failed", digest, "; ".join(failed))
    return ss.Feature(ss.FEATURE_HELM, "Provisioned", digest)


async def _finalize(ctx: Context, memory: SummaryMemory, obj: Any, raw: Mapping[str, Any]) -> Result:
    meta = raw["metadata"]
    if ss.FINALIZER not in (meta.get("finalizers") or []):
        return Result()
    leave = (meta.get("annotations") or {}).get(ss.LEAVE_POLICIES_ANNOTATION) == "true"
    ours = _ours_to_withdraw(ctx, raw)
    if ours:
        await ctx.event(obj, True, NOT_OURS, f"not created by fleetwave ({ours}): nothing is withdrawn")
    if pull.is_pull_member(ctx, summary_pull.cluster_of(raw)):
        waiting = await summary_pull.withdraw(ctx, obj, raw, _snapshot(ctx, raw), leave or bool(ours))
        if waiting is not None:
            return waiting
    else:
        target, _ = _target(ctx, raw)
        if target is not None and not leave and not ours:
            waiting = await _withdraw_pushed(ctx, obj, raw, target)
            if waiting is not None:
                return waiting
    finalizers = [f for f in meta.get("finalizers") or [] if f != ss.FINALIZER]
    await _patch_meta(ctx, meta["namespace"], meta["name"], {"finalizers": finalizers})
    memory.forget(SummaryKey.of(raw))
    drift_detection.forget(ctx, SummaryKey.of(raw).key)
    ctx.forget_rollout("ClusterSummary", f"{meta['namespace']}/{meta['name']}")
    return Result()


async def _withdraw_pushed(
    ctx: Context, obj: Any, raw: Mapping[str, Any], target: MemberTarget
) -> Result | None:
    """Withdraw from a push member; a Result when deletion must wait (its checks)."""
    try:
        await _probe(target)
        return await withdraw(ctx, obj, raw, target, _snapshot(ctx, raw))
    except MemberUnreachable as e:
        # Never strand the summary forever on a cluster that is gone; say what was left behind.
        await ctx.event(obj, True, "WithdrawSkipped", f"{e}; its content was left in place")
        return None


async def withdraw(
    ctx: Context, obj: Any, raw: Mapping[str, Any], target: MemberTarget, body: Mapping[str, Any]
) -> Result | None:
    """Remove what the summary `raw` delivered from `target` (its content `body`): preDeleteChecks,
    the inventory, its helm releases, postDeleteChecks. A Result when a check makes it wait (the
    controller for push members, the member's agent for pull members, ADR 0106)."""
    meta, previous, profile = raw["metadata"], raw.get("status") or {}, _profile_spec(raw)
    waiting = await _delete_checks(
        ctx, obj, target, profile.pre_delete_checks, "preDeleteChecks", owner_of(raw)
    )
    if waiting:
        return waiting
    await manifests.withdraw(
        tenancy.as_controller(target),
        inventory=inventory(meta["namespace"], meta["name"]),
        kinds=_previous_kinds(previous)
        | {kinds.GVK(str(o["apiVersion"]), str(o["kind"])) for o in _objects(body)},
    )
    owners = (dc.inventory_key(owner_of(raw)), dc.inventory_key(inventory(meta["namespace"], meta["name"])))
    for release, namespace, owned_only in _releases_to_uninstall(raw, body):
        await ctx.helm.uninstall(
            target, release=release, namespace=namespace, owner=owners, owned_only=owned_only
        )
    return await _delete_checks(
        ctx, obj, target, profile.post_delete_checks, "postDeleteChecks", owner_of(raw)
    )


def _profile_spec(raw: Mapping[str, Any]) -> ClusterProfileSpec:
    try:
        return ClusterProfileSpec.model_validate((raw.get("spec") or {}).get("clusterProfileSpec") or {})
    except ValueError:
        return ClusterProfileSpec()  # a spec that no longer parses asks for no checks


async def _delete_checks(
    ctx: Context, obj: Any, target: MemberTarget, checks: list[ValidateHealth] | None, field: str, owner: str
) -> Result | None:
    """preDeleteChecks (before withdrawing) or postDeleteChecks (after): the summary, and so its
    deletion, waits until they pass; a Result ends this pass."""
    if not checks:
        return None
    verdict = await ctx.health.check(target, checks, objects=(), owner=owner)
    if verdict.ok:
        return None
    message = f"deletion waits for {field}: {verdict.message}"
    log.info("ClusterSummary %s/%s %s", obj.metadata.namespace, obj.metadata.name, message)
    await ctx.event(obj, True, f"{field[0].upper()}{field[1:]}Failing", message)
    return Result(requeue_after=ctx.judge_poll)


def _ours_to_withdraw(ctx: Context, raw: Mapping[str, Any]) -> str:
    """Why a summary being deleted must not withdraw anything ("" when it may). Its profile is often
    gone by now (garbage collection deletes the summaries after it), so a missing owner is fine; a
    live owner must be the one its reference names."""
    problem = ss.foreign(raw, owner_api_version=ctx.api_version("ClusterProfile"))
    if problem:
        return problem
    profile = str(raw["metadata"]["labels"][ss.PROFILE_LABEL])
    owner = ctx.cache.get("ClusterProfile", None, profile)
    return (
        ""
        if owner is None
        else ss.foreign(
            raw, profile, (owner.get("metadata") or {}).get("uid"), ctx.api_version("ClusterProfile")
        )
    )


def _snapshot(ctx: Context, raw: Mapping[str, Any]) -> dict[str, Any]:
    """The content snapshot the summary delivers ({} when it is gone or unreadable): its kinds are
    withdrawn too (a summary deleted between applying and recording its status has no deployed kinds
    in its status), and only its charts' releases are uninstalled."""
    name = str((raw["metadata"].get("annotations") or {}).get(ss.CONTENT_ANNOTATION) or "")
    try:
        return content.read_snapshot(ctx.cache, ctx.namespace, name) or {}
    except content.ContentError:
        return {}


def _releases_to_uninstall(raw: Mapping[str, Any], body: Mapping[str, Any]) -> list[tuple[str, str, bool]]:
    """The helm releases to remove when the summary goes, each with whether only a release labelled
    as ours may go (`owned_only`). Three sources name them: the status, the snapshot and the
    summary's own copy of its profile's spec. Status and spec are writable by others, and the
    snapshot may already be gone (garbage collection deletes it with the profile) while the status
    is not written yet (a summary deleted during its first delivery): a name not given by both the
    status and the snapshot removes only a release our owner label is on; one both give removes an
    unlabelled release too (installed before releases were labelled)."""
    charts = [
        _release_of(c.get("chart") if isinstance(c, Mapping) else None)
        for c in _entries(body.get("helmCharts"))
    ]
    recorded = [_release_of(r) for r in _entries((raw.get("status") or {}).get("helmReleaseSummaries"))]
    profile_spec = (raw.get("spec") or {}).get("clusterProfileSpec")
    specified_charts = profile_spec.get("helmCharts") if isinstance(profile_spec, Mapping) else None
    specified = [_release_of(c) for c in _entries(specified_charts)]
    named = list(dict.fromkeys([*recorded, *charts, *specified]))
    return [
        (name, namespace, not ((name, namespace) in charts and (name, namespace) in recorded))
        for name, namespace in named
    ]


def _entries(listed: Any) -> list[Any]:
    """At most MAX_LIST entries of a list: a profile has at most that many charts, so a longer list
    was not written by us."""
    return list(listed[:MAX_LIST]) if isinstance(listed, list) else []


def _release_of(entry: Any) -> tuple[str, str]:
    """A chart's or a release summary's (releaseName, releaseNamespace); helm is given neither before
    `check_release` has refused what cannot be a release's name."""
    fields = entry if isinstance(entry, Mapping) else {}
    return str(fields.get("releaseName")), str(fields.get("releaseNamespace"))


async def _patch_meta(ctx: Context, namespace: str, name: str, metadata: Mapping[str, Any]) -> None:
    await ops.merge_patch(
        ctx.client, ctx.resource("ClusterSummary"), name, {"metadata": dict(metadata)}, namespace=namespace
    )

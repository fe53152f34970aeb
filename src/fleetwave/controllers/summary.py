"""ClusterSummary reconcile: deliver one profile's pinned content to one member cluster.

Reads the content snapshot the profile pinned (never the live ConfigMaps), applies resources by
server-side apply and helm charts with the real helm, prunes what left the content, checks readiness
and validateHealths, and reports per feature Provisioning / Provisioned / Failed. A finalizer makes
deleting the summary withdraw what it deployed (unless the profile said LeavePolicies).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping
from typing import Any

from fleetwave.api.sveltos import ClusterProfileSpec, HelmChart
from fleetwave.controllers import content, members
from fleetwave.controllers import summary_status as ss
from fleetwave.controllers.context import Context, HelmOutcome, as_dict
from fleetwave.delivery import content as dc
from fleetwave.delivery import manifests
from fleetwave.delivery.target import MemberTarget, MemberUnreachable
from fleetwave.kube import client as kubeclient
from fleetwave.kube import kinds, ops
from fleetwave.kube.status import StatusWrite, write_status
from fleetwave.runtime.controller import Result

log = logging.getLogger(__name__)

NOT_READY_POLL = 2.0  # member clusters are not watched: re-check readiness of a rollout in flight
DRIFT_POLL = 30.0
UNREACHABLE_RETRY = 5.0
PROBE_TIMEOUT = 5.0


def inventory(namespace: str, name: str) -> str:
    return f"summary/{namespace}/{name}"


async def reconcile(ctx: Context, key: str) -> Result:
    namespace, _, name = key.partition("/")
    obj = ctx.cache.obj("ClusterSummary", namespace, name)
    if obj is None:
        return Result()
    raw = as_dict(obj)
    meta = raw["metadata"]
    if meta.get("deletionTimestamp"):
        return await _finalize(ctx, obj, raw)
    if ss.FINALIZER not in (meta.get("finalizers") or []):
        await _patch_meta(
            ctx, namespace, name, {"finalizers": [*(meta.get("finalizers") or []), ss.FINALIZER]}
        )
        return Result(requeue=True)
    outcome = await _deliver(ctx, raw)
    status = ss.status_body(
        outcome, generation=meta.get("generation"), now=ctx.clock(), previous=raw.get("status") or {}
    )
    written = await write_status(ctx.client, kinds.resource("ClusterSummary"), obj, status)
    if written is StatusWrite.CONFLICT:
        return Result(requeue=True)
    if written is StatusWrite.WRITTEN and outcome.failed:
        await ctx.event(obj, True, "DeliveryFailed", outcome.failed)
    return _requeue(raw, outcome)


def _requeue(raw: Mapping[str, Any], outcome: ss.Outcome) -> Result:
    if outcome.unreachable:
        return Result(requeue_after=UNREACHABLE_RETRY)
    if outcome.failed:
        # Retried with per-key exponential backoff (up to 5 min): content may start working (a CRD
        # arrives), but a chart with bad values must not churn helm revisions every few seconds.
        return Result(requeue=True)
    if not outcome.healthy and not outcome.dry_run:
        return Result(requeue_after=NOT_READY_POLL)
    if (raw.get("spec") or {}).get("clusterProfileSpec", {}).get(
        "syncMode"
    ) == "ContinuousWithDriftDetection":
        return Result(requeue_after=DRIFT_POLL)
    return Result()


def _target(ctx: Context, spec: Mapping[str, Any]) -> tuple[MemberTarget | None, str]:
    mc = ctx.cache.get("MemberCluster", spec.get("clusterNamespace"), str(spec.get("clusterName")))
    if mc is None:
        return None, f"cluster {spec.get('clusterNamespace')}/{spec.get('clusterName')} is not registered"
    member = members.from_object(mc)
    secret = ctx.cache.get("Secret", member.secret[0], member.secret[1])
    target = members.target(member, secret)
    if target is None:
        return (
            None,
            f"kubeconfig Secret {member.secret[0]}/{member.secret[1]} of cluster {member.key} is missing",
        )
    return target, ""


async def _deliver(ctx: Context, raw: Mapping[str, Any]) -> ss.Outcome:
    spec = raw.get("spec") or {}
    annotations = raw["metadata"].get("annotations") or {}
    wanted_hash = str(annotations.get(ss.CONTENT_HASH_ANNOTATION, ""))
    profile = ClusterProfileSpec.model_validate(spec.get("clusterProfileSpec") or {})
    target, problem = _target(ctx, spec)
    if target is None:
        return ss.Outcome(wanted_hash, unreachable=problem)
    snapshot = ctx.cache.get("ConfigMap", ctx.namespace, str(annotations.get(ss.CONTENT_ANNOTATION)))
    if snapshot is None:
        return ss.Outcome(wanted_hash, health_message="waiting for the content snapshot")
    body = content.load_snapshot(snapshot)
    previous = raw.get("status") or {}
    dry_run = profile.sync_mode == "DryRun"
    try:
        await _probe(target)
        if profile.sync_mode == "OneTime" and _provisioned(previous):
            return await _health_only(ctx, target, profile, body, wanted_hash, previous)
        return await _deliver_to(ctx, target, raw, profile, body, wanted_hash, dry_run)
    except MemberUnreachable as e:
        return ss.Outcome(wanted_hash, unreachable=str(e))


async def _probe(target: MemberTarget) -> None:
    """Fail fast on a member that does not answer: helm and watches would otherwise hang for minutes."""
    try:
        async with kubeclient.async_http(
            kubeclient.config_from_bytes(target.kubeconfig), timeout=PROBE_TIMEOUT
        ) as http:
            response = await http.get("/readyz")
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
        and all(f.get("status") == "Provisioned" for f in features)
    )


def _objects(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [o for p in body.get("policies") or [] for o in p.get("objects") or []]


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
) -> ss.Outcome:
    """OneTime: deployed once and never re-applied (not even while unhealthy); health is still judged.

    A later revision counts as delivered: OneTime promises not to change the cluster again (ADR 0035).
    """
    gvks = {
        g.get("featureID"): tuple(g.get("deployedGroupVersionKind") or [])
        for g in previous.get("deployedGVKs") or []
    }
    features = tuple(
        ss.Feature(f["featureID"], f["status"], f.get("hash", ""), deployed=gvks.get(f["featureID"], ()))
        for f in previous.get("featureSummaries") or []
    )
    health = await ctx.health.check(target, profile.validate_healths or [], objects=_ids(_objects(body)))
    message = health.message + "; OneTime: deployed once, later changes are not applied"
    return ss.Outcome(wanted_hash, features, healthy=health.ok, health_message=message)


async def _deliver_to(
    ctx: Context,
    target: MemberTarget,
    raw: Mapping[str, Any],
    profile: ClusterProfileSpec,
    body: Mapping[str, Any],
    wanted_hash: str,
    dry_run: bool,
) -> ss.Outcome:
    meta = raw["metadata"]
    inv = inventory(meta["namespace"], meta["name"])
    objects = _objects(body)
    drift: list[str] = []
    if profile.sync_mode == "ContinuousWithDriftDetection" and objects:
        drift = [f"{d.ref}: {d.reason}" for d in await manifests.detect_drift(target, objects, inventory=inv)]
    resources = await _resources(target, objects, inv, raw.get("status") or {}, dry_run)
    releases = await _charts(ctx, target, body.get("helmCharts") or [], raw.get("status") or {}, dry_run)
    features = [resources] if objects or resources.deployed else []
    if body.get("helmCharts") or releases:
        features.append(_helm_feature(releases, body))
    outcome = ss.Outcome(wanted_hash, tuple(features), tuple(releases), dry_run=dry_run, drift=tuple(drift))
    if outcome.failed or dry_run:
        return outcome
    health = await ctx.health.check(target, profile.validate_healths or [], objects=_ids(objects))
    return ss.Outcome(
        wanted_hash,
        tuple(features),
        tuple(releases),
        healthy=health.ok,
        health_message=health.message,
        drift=tuple(drift),
    )


async def _resources(
    target: MemberTarget, objects: list[dict[str, Any]], inv: str, previous: Mapping[str, Any], dry_run: bool
) -> ss.Feature:
    before = _previous_kinds(previous)
    report = await manifests.apply(target, objects, inventory=inv, dry_run=dry_run)
    if not report.ok:
        return ss.Feature(ss.FEATURE_RESOURCES, "Failed", report.content_hash, "; ".join(report.errors))
    if not dry_run:
        await manifests.prune(target, inventory=inv, kinds=before | report.kinds, keep=report.refs)
    deployed = tuple(sorted({ss.gvk_string(g.api_version, g.kind) for g in report.kinds}))
    return ss.Feature(ss.FEATURE_RESOURCES, "Provisioned", report.content_hash, deployed=deployed)


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
) -> list[ss.HelmRelease]:
    releases = []
    wanted = set()
    for entry in charts:
        chart = HelmChart.model_validate(entry["chart"])
        wanted.add((chart.release_name, chart.release_namespace))
        if chart.helm_chart_action == "Uninstall":
            outcome = await ctx.helm.uninstall(
                target, release=chart.release_name, namespace=chart.release_namespace
            )
        else:
            outcome = await ctx.helm.install_or_upgrade(
                target, chart, values=entry.get("values") or {}, dry_run=dry_run
            )
        releases.append(_release(chart.release_name, chart.release_namespace, outcome))
    for old in previous.get("helmReleaseSummaries") or []:  # charts removed from the profile
        key = (old.get("releaseName"), old.get("releaseNamespace"))
        if key not in wanted and not dry_run and old.get("status") != "Uninstalled":
            await ctx.helm.uninstall(target, release=str(key[0]), namespace=str(key[1]))
    return releases


def _release(name: str, namespace: str, outcome: HelmOutcome) -> ss.HelmRelease:
    return ss.HelmRelease(
        name,
        namespace,
        outcome.status,
        outcome.values_hash,
        outcome.chart_version,
        "" if outcome.ok else outcome.message,
    )


def _helm_feature(releases: list[ss.HelmRelease], body: Mapping[str, Any]) -> ss.Feature:
    digest = hashlib.sha256(dc.canonical_json(list(body.get("helmCharts") or [])).encode()).hexdigest()
    failed = [
        f"{r.release_namespace}/{r.release_name}: {r.message}" for r in releases if r.status == "Failed"
    ]
    if failed:
        return ss.Feature(ss.FEATURE_HELM, "Failed", digest, "; ".join(failed))
    return ss.Feature(ss.FEATURE_HELM, "Provisioned", digest)


async def _finalize(ctx: Context, obj: Any, raw: Mapping[str, Any]) -> Result:
    meta = raw["metadata"]
    if ss.FINALIZER not in (meta.get("finalizers") or []):
        return Result()
    leave = (meta.get("annotations") or {}).get(ss.LEAVE_POLICIES_ANNOTATION) == "true"
    target, _ = _target(ctx, raw.get("spec") or {})
    if target is not None and not leave:
        previous = raw.get("status") or {}
        try:
            await manifests.withdraw(
                target, inventory=inventory(meta["namespace"], meta["name"]), kinds=_previous_kinds(previous)
            )
            for r in previous.get("helmReleaseSummaries") or []:
                await ctx.helm.uninstall(target, release=r["releaseName"], namespace=r["releaseNamespace"])
        except MemberUnreachable as e:
            # Never strand the summary forever on a cluster that is gone; say what was left behind.
            await ctx.event(obj, True, "WithdrawSkipped", f"{e}; its content was left in place")
    finalizers = [f for f in meta.get("finalizers") or [] if f != ss.FINALIZER]
    await _patch_meta(ctx, meta["namespace"], meta["name"], {"finalizers": finalizers})
    return Result()


async def _patch_meta(ctx: Context, namespace: str, name: str, metadata: Mapping[str, Any]) -> None:
    await ops.merge_patch(
        ctx.client, kinds.resource("ClusterSummary"), name, {"metadata": dict(metadata)}, namespace=namespace
    )

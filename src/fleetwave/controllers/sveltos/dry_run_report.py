"""DryRun reports: what a profile in `syncMode: DryRun` would change on each cluster (ADR 0113).

The delivery's dry run already knows, per object, whether applying would create, change (and
where) or leave it, and helm's dry run whether a release would be installed, upgraded or left; the
objects the summary's inventory has that the content no longer has would be deleted. That is
written, as Sveltos does, into one ClusterReport per profile and cluster (`<profile>--<type>--<
cluster>` in the cluster's namespace), owned by the ClusterSummary: it goes when the summary goes
(the profile is deleted or stops selecting the cluster), and is deleted when the profile leaves
DryRun. A Secret's values never appear: only that its data would change.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from fleetwave.api.conditions import find
from fleetwave.controllers.shared.context import Context
from fleetwave.controllers.sveltos import content
from fleetwave.controllers.sveltos import summary_status as ss
from fleetwave.delivery import content as dc
from fleetwave.delivery import helm_preview, manifests
from fleetwave.delivery.target import MemberTarget
from fleetwave.kube import kinds, ops

log = logging.getLogger(__name__)

KIND = "ClusterReport"
UNINSTALL = "uninstall"  # HelmOutcome.action of a release `helmChartAction: Uninstall` would remove
MAX_ENTRIES = 2000
_OBJECT_ACTIONS = {
    "created": "Create",
    "configured": "Update",
    "unchanged": "No Action",
    "conflict": "Conflict",
}


def report_name(profile: str, cluster_name: str, cluster_type: str) -> str:
    """Sveltos' name of a ClusterProfile's report on one cluster."""
    return f"{profile}--{cluster_type.lower()}--{cluster_name}"


def resource_entry(ref: dc.ObjectRef, action: str, message: str = "") -> dict[str, Any]:
    group, _, version = ref.api_version.rpartition("/")
    resource: dict[str, Any] = {"name": ref.name, "group": group, "kind": ref.kind, "version": version}
    if ref.namespace:
        resource["namespace"] = ref.namespace
    entry: dict[str, Any] = {"resource": resource, "action": action}
    if message:
        entry["message"] = message[:1024]
    return entry


def object_entry(applied: manifests.AppliedObject) -> dict[str, Any]:
    """One object of a dry-run apply as a ResourceReport."""
    if applied.action == "failed":
        return resource_entry(applied.ref, "Error", applied.error or "")
    action = _OBJECT_ACTIONS.get(applied.action, "No Action")
    if action == "Update":
        return resource_entry(applied.ref, action, "would change " + ", ".join(applied.changes))
    return resource_entry(applied.ref, action, applied.error or "")


def release_entry(release: ss.HelmRelease) -> dict[str, Any]:
    """One helm release of a dry run as a ReleaseReport."""
    entry: dict[str, Any] = {
        "chartName": release.release_name,
        "releaseNamespace": release.release_namespace,
        "chartVersion": release.chart_version,
    }
    action, message = _release_action(release)
    if action:
        entry["action"] = action
    if message:
        entry["message"] = message[:1024]
    return entry


def _release_action(release: ss.HelmRelease) -> tuple[str, str]:
    before = release.installed_version
    if release.action == "installed":
        return "Install", ""
    if release.action == "upgraded":
        if before and before == release.chart_version:
            return "Update Values", f"chart version {before}, other values"
        return "Upgrade", f"from chart version {before}" if before else ""
    if release.action == "unchanged":
        return "No Action", ""
    if release.action == UNINSTALL:
        return "Delete", "helmChartAction is Uninstall: uninstalled if it is installed"
    if release.action in ("uninstalled", "absent"):
        return ("Delete", "") if release.action == "uninstalled" else ("No Action", "not installed")
    conflict = release.message.startswith("conflict") or "already" in release.message
    return ("Conflict" if conflict else ""), release.message


def split_objects(body: Mapping[str, Any]) -> set[tuple[str, str, str, str]]:
    """Identities of the objects built from kustomizationRefs (the rest are policyRefs')."""
    return {
        dc.ref_of(o).identity
        for p in body.get("policies") or []
        if p.get("feature") == ss.FEATURE_KUSTOMIZE and p.get("deploymentType") != content.LOCAL
        for o in p.get("objects") or []
        if isinstance(o, Mapping) and o.get("kind") and (o.get("metadata") or {}).get("name")
    }


def report_status(
    applied: Iterable[manifests.AppliedObject],
    deleted: Iterable[dc.ObjectRef],
    releases: Iterable[ss.HelmRelease],
    kustomized: set[tuple[str, str, str, str]],
) -> dict[str, Any]:
    """The ClusterReport's status: lists bounded, None where a feature has nothing to report."""
    resources: list[dict[str, Any]] = []
    kustomize: list[dict[str, Any]] = []
    for a in applied:
        group, kind, _namespace, name = a.ref.identity
        # Content that names no namespace is placed in one by the apply: match it by the rest.
        built = a.ref.identity in kustomized or (group, kind, "", name) in kustomized
        (kustomize if built else resources).append(object_entry(a))
    resources += [resource_entry(ref, "Delete") for ref in deleted]
    listed = list(releases)
    charts = [release_entry(r) for r in listed]
    helm = [helm_entry(c) for r in listed for c in r.resources]
    return {
        "resourceReports": resources[:MAX_ENTRIES] or None,
        "kustomizeResourceReports": kustomize[:MAX_ENTRIES] or None,
        "releaseReports": charts[:MAX_ENTRIES] or None,
        "helmResourceReports": helm[:MAX_ENTRIES] or None,
    }


def helm_entry(change: helm_preview.ResourceChange) -> dict[str, Any]:
    """One object of a release a dry run would change, as a ResourceReport."""
    ref = dc.ObjectRef(change.api_version, change.kind, change.namespace or None, change.name)
    message = "would change " + ", ".join(change.paths) if change.paths else ""
    return resource_entry(ref, change.action, message)


async def preview(
    outcome: ss.Outcome,
    target: MemberTarget,
    body: Mapping[str, Any],
    tried: manifests.ApplyReport | None,
    inventory: str,
    kinds_before: set[kinds.GVK],
) -> ss.Outcome:
    """`outcome` of a dry-run delivery with its report: the dry-run apply's objects, what pruning
    would delete, and helm's would-be actions."""
    applied = tried.objects if tried is not None else ()
    keep = [a.ref for a in applied]
    searched = kinds_before | {a.ref.gvk for a in applied}
    deleted = (
        await manifests.leftovers(target, inventory=inventory, kinds=searched, keep=keep) if searched else []
    )
    status = report_status(applied, deleted, outcome.releases, split_objects(body))
    return dataclasses.replace(outcome, dry_run_report=status)


def document(summary: Mapping[str, Any], api_version: str, summary_api_version: str) -> dict[str, Any]:
    """The ClusterReport of `summary` (metadata and spec; its status is written separately)."""
    meta, spec = summary["metadata"], summary.get("spec") or {}
    labels = meta.get("labels") or {}
    profile = str(labels.get(ss.PROFILE_LABEL) or "")
    cluster, cluster_type = str(spec.get("clusterName")), str(spec.get("clusterType") or ss.SVELTOS_TYPE)
    return {
        "apiVersion": api_version,
        "kind": KIND,
        "metadata": {
            "name": report_name(profile, cluster, cluster_type),
            "namespace": meta["namespace"],
            "labels": {
                ss.PROFILE_LABEL: profile,
                ss.SVELTOS_PROFILE_LABEL: profile,
                ss.SVELTOS_CLUSTER_NAME_LABEL: cluster,
                ss.SVELTOS_CLUSTER_TYPE_LABEL: cluster_type,
            },
            "ownerReferences": [
                {
                    "apiVersion": summary_api_version,
                    "kind": "ClusterSummary",
                    "name": meta["name"],
                    "uid": meta["uid"],
                }
            ],
        },
        "spec": {"clusterNamespace": meta["namespace"], "clusterName": cluster},
    }


def _was_dry_run(summary: Mapping[str, Any]) -> bool:
    return (find(summary.get("status") or {}, "Ready") or {}).get("reason") == "DryRun"


async def publish(ctx: Context, summary: Mapping[str, Any], outcome: ss.Outcome) -> None:
    """Write the summary's report after a dry run; delete it once the profile left DryRun. A write
    that fails is logged and tried again at the next dry run (the report is a view, never a gate)."""
    try:
        if outcome.dry_run_report is not None:
            await _write(ctx, summary, outcome.dry_run_report)
        elif _was_dry_run(summary) and not outcome.dry_run and not outcome.unreachable:
            doc = document(summary, ctx.api_version(KIND), ctx.api_version("ClusterSummary"))
            await ops.delete_if_exists(
                ctx.client,
                ctx.resource(KIND),
                doc["metadata"]["name"],
                namespace=doc["metadata"]["namespace"],
            )
    except ops.StatusError as e:
        log.warning(
            "ClusterReport of ClusterSummary %s: %s", summary["metadata"].get("name"), ops.message_of(e)
        )


async def _write(ctx: Context, summary: Mapping[str, Any], status: Mapping[str, Any]) -> None:
    doc = document(summary, ctx.api_version(KIND), ctx.api_version("ClusterSummary"))
    meta = doc["metadata"]
    await ops.apply(ctx.client, doc, resource=ctx.resource(KIND))
    await ops.merge_patch(
        ctx.client,
        ctx.resource(KIND),
        meta["name"],
        {"status": dict(status)},
        namespace=meta["namespace"],
        status=True,
    )

"""Pure pieces of ClusterSummary reconciliation: names, labels, what the status says.

The status mirrors Sveltos' (featureSummaries, helmReleaseSummaries, deployedGVKs) and adds a
`Ready` condition plus `observedContentHash`, which is what a profile reads to decide whether a
cluster has the current revision delivered and healthy.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from fleetwave.api.conditions import cond, find
from fleetwave.api.meta import API_VERSION
from fleetwave.core import timestamps
from fleetwave.delivery.helm_preview import ResourceChange
from fleetwave.kube import status as kstatus
from fleetwave.translate.common import cluster_key, split_key

PROFILE_LABEL = "fleetwave.io/cluster-profile"
CLUSTER_LABEL = "fleetwave.io/cluster"
SVELTOS_PROFILE_LABEL = "projectsveltos.io/cluster-profile-name"
CONTENT_ANNOTATION = "fleetwave.io/content"
CONTENT_HASH_ANNOTATION = "fleetwave.io/content-hash"
LEAVE_POLICIES_ANNOTATION = "fleetwave.io/leave-policies"
# The hash of what the profile last wrote into a summary (spec, labels, annotations, owner): the API
# server adds defaults to the spec, so comparing the stored spec with the wanted one never matches.
WRITTEN_HASH_ANNOTATION = "fleetwave.io/written-hash"
FINALIZER = "fleetwave.io/cleanup"

OWNER_API_VERSION = API_VERSION
OWNER_KIND = "ClusterProfile"

FEATURE_RESOURCES = "Resources"
WAITING = "WaitingForPreDeployChecks"
FEATURE_HELM = "Helm"
FEATURE_KUSTOMIZE = "Kustomize"


# Sveltos' `spec.clusterType` of a summary, and the label it is copied to (with the cluster's name).
SVELTOS_TYPE = "Sveltos"
CAPI_TYPE = "Capi"
SVELTOS_CLUSTER_TYPE_LABEL = "projectsveltos.io/cluster-type"
SVELTOS_CLUSTER_NAME_LABEL = "projectsveltos.io/cluster-name"


def cluster_of(spec: Mapping[str, Any]) -> str:
    """The member key of a summary's cluster: `spec.clusterType` Capi is a Cluster API cluster
    (`capi:namespace/name`, ADR 0109), anything else a registered member (`namespace/name`)."""
    capi = spec.get("clusterType") == CAPI_TYPE
    return cluster_key(str(spec.get("clusterNamespace")), str(spec.get("clusterName")), capi=capi)


def cluster_type(cluster: str) -> str:
    """The `clusterType` of a summary delivering to the member `cluster` (a key)."""
    return CAPI_TYPE if split_key(cluster)[0] else SVELTOS_TYPE


def summary_name(profile: str, cluster: str, cluster_type: str = SVELTOS_TYPE) -> str:
    """Sveltos' naming (`<profile>-sveltos-<cluster>`, `<profile>-capi-<cluster>` for a Cluster API
    cluster), hashed down when it would exceed 253 chars."""
    name = f"{profile}-{'capi' if cluster_type == CAPI_TYPE else 'sveltos'}-{cluster}"
    if len(name) <= 253:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:10]
    return f"{name[:242]}-{digest}"


def foreign(
    summary: Mapping[str, Any],
    profile: str | None = None,
    uid: str | None = None,
    owner_api_version: str = OWNER_API_VERSION,
) -> str:
    """Why `summary` is not one fleetwave made ("" when it is): labels, name and namespace as
    fleetwave writes them, and a controller reference to ClusterProfile `profile` whose uid is `uid`
    (the live profile's: a reference to a profile that is gone, or was re-created, does not count).
    With `profile`/`uid` left None only the summary's own shape is checked."""
    meta = summary.get("metadata") or {}
    spec = summary.get("spec") or {}
    labels = meta.get("labels") or {}
    named = labels.get(PROFILE_LABEL)
    cluster = spec.get("clusterName")
    if not named:
        return f"it has no {PROFILE_LABEL} label"
    if profile is not None and named != profile:
        return f"its {PROFILE_LABEL} label names another profile"
    if not cluster or labels.get(CLUSTER_LABEL) != cluster:
        return f"its {CLUSTER_LABEL} label does not name spec.clusterName"
    if spec.get("clusterNamespace") != meta.get("namespace"):
        return "spec.clusterNamespace is not its own namespace"
    if meta.get("name") != summary_name(str(named), str(cluster), str(spec.get("clusterType"))):
        return f"its name is not the one fleetwave gives ({PROFILE_LABEL} + spec.clusterName)"
    controllers = [r for r in meta.get("ownerReferences") or [] if r.get("controller")]
    owner = next(
        (
            r
            for r in controllers
            if r.get("apiVersion") == owner_api_version
            and r.get("kind") == OWNER_KIND
            and r.get("name") == named
        ),
        None,
    )
    if owner is None:
        return f"it has no controller reference to ClusterProfile {named}"
    if uid is not None and owner.get("uid") != uid:
        return f"its controller reference is not to the ClusterProfile {named} that exists"
    return ""


@dataclass(frozen=True, slots=True)
class Feature:
    feature_id: str
    status: str  # Provisioning | Provisioned | Failed | Removed
    hash: str
    message: str = ""
    deployed: tuple[str, ...] = ()  # Kind.version.group, Sveltos' deployedGroupVersionKind format


@dataclass(frozen=True, slots=True)
class HelmRelease:
    release_name: str
    release_namespace: str
    status: str  # Managing | Failed
    values_hash: str = ""
    chart_version: str = ""
    message: str = ""
    action: str = ""  # helm's (would-be, in a dry run) action, as HelmOutcome.action
    installed_version: str = ""  # the chart version installed before
    resources: tuple[ResourceChange, ...] = ()  # a dry run's would-be change per object (ADR 0113)


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one reconcile of a ClusterSummary found out."""

    content_hash: str
    features: tuple[Feature, ...] = ()
    releases: tuple[HelmRelease, ...] = ()
    healthy: bool = False
    health_message: str = ""
    unreachable: str = ""  # non-empty: the member could not be reached
    dry_run: bool = False
    drift: tuple[str, ...] = ()
    waiting: str = ""  # non-empty: nothing was deployed this pass (preDeployChecks), and why
    template_inputs: str = ""  # templated content: the fingerprint of the cluster it was rendered for
    health_feature: str = ""  # the feature whose validateHealths check failed (featureID, ADR 0113)
    dry_run_report: Mapping[str, Any] | None = None  # DryRun: the ClusterReport's status (ADR 0113)
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def failed(self) -> str:
        return "; ".join(f"{f.feature_id}: {f.message}" for f in self.features if f.status == "Failed")


def gvk_string(api_version: str, kind: str) -> str:
    group, _, version = api_version.rpartition("/")
    return f"{kind}.{version}.{group}"


def ready_condition(
    outcome: Outcome, *, generation: int | None, now: datetime, previous: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The summary's Ready condition for `outcome`; `previous` is the status it replaces, whose Ready
    condition keeps its transition time while the status stays."""
    if outcome.unreachable:
        status, reason, message = "False", "ClusterUnreachable", outcome.unreachable
    elif outcome.failed:
        status, reason, message = "False", "Failed", outcome.failed
    elif outcome.waiting:
        status, reason, message = "False", WAITING, outcome.waiting
    elif outcome.dry_run:
        status, reason, message = "False", "DryRun", "DryRun: nothing is changed on the cluster"
    elif not outcome.healthy:
        status, reason, message = "False", "Unhealthy", outcome.health_message or "waiting for health checks"
    else:
        status, reason, message = "True", "Provisioned", outcome.health_message or "deployed and healthy"
    return cond(previous, "Ready", status, reason, message[:32768], generation, timestamps.fmt(now))


def progress_only(previous: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether `new` differs from `previous` only in the message of a Ready condition that stays
    False as Unhealthy: a health judgement's progress ("0 of 1 updated replicas available", then
    "1 updated, 0 available"), not a transition. Such writes are held back a few seconds (ADR 0068):
    each one wakes the profile and the promotion, which write their status in turn."""
    old, fresh = find(previous, "Ready") or {}, find(new, "Ready") or {}
    if old.get("reason") != "Unhealthy" or fresh.get("reason") != "Unhealthy":
        return False
    if (
        old.get("status") != "False"
        or fresh.get("status") != "False"
        or old.get("message") == fresh.get("message")
    ):
        return False
    before, after = (kstatus.normalized(_without_ready_message(s)) for s in (previous, new))
    return bool(before == after)


def _without_ready_message(status: Mapping[str, Any]) -> dict[str, Any]:
    conditions = [
        {**c, "message": ""} if c.get("type") == "Ready" else c for c in status.get("conditions") or []
    ]
    return {**status, "conditions": conditions}


NON_RETRIABLE = "FailedNonRetriable"


def gave_up(status: Mapping[str, Any], *, content_hash: str, generation: int | None) -> bool:
    """Whether delivery stopped retrying this content at this generation (maxConsecutiveFailures):
    only a new revision or an edit of the summary (its profile's spec) tries again."""
    ready = find(status, "Ready") or {}
    return (
        status.get("observedContentHash") == content_hash
        and ready.get("observedGeneration") == generation
        and any(f.get("status") == NON_RETRIABLE for f in status.get("featureSummaries") or [])
    )


def _give_up(outcome: Outcome, features: list[dict[str, Any]], limit: int | None) -> Outcome:
    """The outcome once `limit` consecutive failures of a feature are reached: said in its message."""
    if not limit or not any(f.get("consecutiveFailures", 0) >= limit for f in features):
        return outcome
    note = f"gave up after {limit} consecutive failures (maxConsecutiveFailures); a new revision retries"
    for f in features:
        if f.get("consecutiveFailures", 0) >= limit:
            f["status"] = NON_RETRIABLE
    changed = tuple(
        Feature(f.feature_id, f.status, f.hash, f"{f.message}; {note}", f.deployed)
        if f.status == "Failed"
        else f
        for f in outcome.features
    )
    for entry in features:
        if entry["status"] == NON_RETRIABLE and "failureMessage" in entry:
            entry["failureMessage"] = f"{entry['failureMessage']}; {note}"
    return dataclasses.replace(outcome, features=changed)


def status_body(
    outcome: Outcome,
    *,
    generation: int | None,
    now: datetime,
    previous: Mapping[str, Any],
    max_failures: int | None = None,
) -> dict[str, Any]:
    features = _features(outcome, now, previous)
    outcome = _give_up(outcome, features, max_failures)
    deployed = [
        {"featureID": f.feature_id, "deployedGroupVersionKind": list(f.deployed)}
        for f in outcome.features
        if f.deployed
    ]
    # An unreachable member tells nothing new: keep what the last reachable delivery recorded.
    releases = (
        previous.get("helmReleaseSummaries")
        if outcome.unreachable
        else [_release(r) for r in outcome.releases] or None
    )
    return {
        "dependencies": "no dependencies",
        "observedContentHash": previous.get("observedContentHash")
        if outcome.unreachable
        else outcome.content_hash,
        "featureSummaries": features or previous.get("featureSummaries"),
        "deployedGVKs": deployed or previous.get("deployedGVKs"),
        "helmReleaseSummaries": releases,
        "conditions": [ready_condition(outcome, generation=generation, now=now, previous=previous)],
        "failureMessage": outcome.unreachable or outcome.failed or None,
        "drift": list(outcome.drift) or None,
        # Templated content is rendered for the cluster as it was (ADR 0089): a change of its labels,
        # annotations or spec makes this differ and the content is rendered and delivered again.
        "templateInputsHash": previous.get("templateInputsHash")
        if outcome.unreachable
        else outcome.template_inputs or None,
    }


def _features(outcome: Outcome, now: datetime, previous: Mapping[str, Any]) -> list[dict[str, Any]]:
    """featureSummaries; lastAppliedTime moves only when a feature's hash or status changed."""
    stamp = timestamps.fmt(now)
    old_features = {f.get("featureID"): f for f in previous.get("featureSummaries") or []}
    features = []
    for f in outcome.features:
        old = old_features.get(f.feature_id) or {}
        changed = old.get("hash") != f.hash or carried_status(previous, old) != f.status
        entry: dict[str, Any] = {
            "featureID": f.feature_id,
            "hash": f.hash,
            "status": f.status,
            "lastAppliedTime": stamp if changed else old.get("lastAppliedTime"),
        }
        if _health_failed(outcome, f):
            # Deployed, but a check of this feature fails: Failed as upstream, naming the check; not a
            # delivery failure (no consecutiveFailures, Ready stays Unhealthy).
            entry.update(status="Failed", failureMessage=outcome.health_message[:4096])
        elif f.message and f.status == "Failed":
            entry["failureMessage"] = f.message
        if f.status == "Failed":
            # Failures of the same content in a row (Sveltos' consecutiveFailures): what
            # maxConsecutiveFailures counts; a success or other content starts again.
            same = old.get("hash") == f.hash and old.get("status") in ("Failed", NON_RETRIABLE)
            entry["consecutiveFailures"] = (int(old.get("consecutiveFailures") or 0) if same else 0) + 1
        features.append(entry)
    return features


def _health_failed(outcome: Outcome, feature: Feature) -> bool:
    return (
        bool(outcome.health_feature)
        and feature.feature_id == outcome.health_feature
        and feature.status == "Provisioned"
        and not outcome.failed
        and not outcome.healthy
    )


def carried_status(status: Mapping[str, Any], feature: Mapping[str, Any]) -> str:
    """A recorded featureSummary's status as deployed content: a feature `Failed` only because one
    of its checks failed (the summary's Ready says Unhealthy: nothing failed to deploy) counts as
    Provisioned (ADR 0113)."""
    value = str(feature.get("status") or "")
    unhealthy = (find(status, "Ready") or {}).get("reason") == "Unhealthy"
    return "Provisioned" if value == "Failed" and unhealthy else value


def carried(previous: Mapping[str, Any]) -> tuple[tuple[Feature, ...], tuple[HelmRelease, ...]]:
    """What a recorded status says was deployed (features with their kinds, helm releases), for a
    pass that only judges health and carries them over as they were."""
    gvks = {
        g.get("featureID"): tuple(g.get("deployedGroupVersionKind") or [])
        for g in previous.get("deployedGVKs") or []
    }
    features = tuple(
        Feature(
            f["featureID"],
            carried_status(previous, f),
            f.get("hash", ""),
            deployed=gvks.get(f["featureID"], ()),
        )
        for f in previous.get("featureSummaries") or []
    )
    releases = tuple(
        HelmRelease(
            str(r.get("releaseName")),
            str(r.get("releaseNamespace")),
            str(r.get("status")),
            values_hash=str(r.get("valuesHash") or ""),
            message=str(r.get("failureMessage") or ""),
        )
        for r in previous.get("helmReleaseSummaries") or []
    )
    return features, releases


def _release(r: HelmRelease) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "releaseName": r.release_name,
        "releaseNamespace": r.release_namespace,
        "status": r.status,
    }
    if r.values_hash:
        entry["valuesHash"] = r.values_hash
    if r.message:
        entry["failureMessage"] = r.message
    return entry


def deployed_kinds(gvks: Iterable[str]) -> list[tuple[str, str]]:
    """Inverse of `gvk_string`: (apiVersion, kind) pairs recorded in a previous status."""
    out = []
    for text in gvks:
        kind, _, rest = text.partition(".")
        version, _, group = rest.partition(".")
        out.append((f"{group}/{version}" if group else version, kind))
    return out

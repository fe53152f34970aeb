"""Pure translations between the objects the controllers watch and the engine's facts.

ClusterSummary status -> engine Delivery; engine status -> the Sveltos-shaped status fields users
read (matchingClusters, updating/updated/failed clusters, conditions).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from fleetwave.api import families
from fleetwave.api.conditions import find
from fleetwave.api.families import Family
from fleetwave.controllers.fleet import capi
from fleetwave.controllers.shared.versioned_memo import PER_SUMMARY, VersionedMemo
from fleetwave.controllers.sveltos import summary_status as ss
from fleetwave.core import model as m
from fleetwave.core import status as st
from fleetwave.translate.common import split_key

_DELIVERIES: VersionedMemo[m.Delivery] = VersionedMemo(PER_SUMMARY)


def delivery_of(
    summary: Mapping[str, Any] | None, content_hash: str, revision: str | None = None
) -> m.Delivery:
    """The delivery of content `content_hash` to one cluster, read from its ClusterSummary.
    `revision`: the engine's revision that content is delivered as; a delivery found at the
    content says so (`Delivery.revision`), so a cluster admitted in the same pass counts as done."""
    if summary is None:
        return m.PENDING
    return _DELIVERIES.get(summary, (content_hash, revision), lambda o: _read(o, content_hash, revision))


def _read(summary: Mapping[str, Any], content_hash: str, revision: str | None) -> m.Delivery:
    annotations = (summary.get("metadata") or {}).get("annotations") or {}
    status = summary.get("status") or {}
    ready = find(status, "Ready")
    if ready is not None and ready.get("reason") == "ClusterUnreachable":  # whatever revision it last had
        return m.Delivery(m.DeliveryPhase.APPLYING, message=str(ready.get("message", "")))
    if ready is not None and ready.get("reason") == ss.WAITING:  # preDeployChecks hold the delivery
        return m.Delivery(m.DeliveryPhase.APPLYING, message=str(ready.get("message", "")))
    if (
        annotations.get(ss.CONTENT_HASH_ANNOTATION) != content_hash
        or status.get("observedContentHash") != content_hash
    ):
        return m.Delivery(m.DeliveryPhase.APPLYING, message="delivering the current revision")
    if ready is None:
        return m.Delivery(m.DeliveryPhase.APPLYING)
    if ready.get("reason") == "Failed":
        return m.Delivery(m.DeliveryPhase.FAILED, message=str(ready.get("message", "")))
    return m.Delivery(
        m.DeliveryPhase.APPLIED,
        ready=ready.get("status") == "True",
        message=str(ready.get("message", "")),
        revision=revision,  # its annotation and its status both name the content (checked above)
    )


def cluster_ref(key: str, family: Family = families.NATIVE) -> dict[str, str]:
    """A reference to a member as its family serves it (a SveltosCluster in the Sveltos groups), or
    to a Cluster API cluster as Sveltos refers to one (`capi:` keys, ADR 0109)."""
    capi_cluster, namespace, name = split_key(key)
    if capi_cluster:
        return {"apiVersion": capi.REF_API_VERSION, "kind": capi.KIND, "namespace": namespace, "name": name}
    served = family.served("MemberCluster")
    return {"apiVersion": served.api_version, "kind": served.kind, "namespace": namespace, "name": name}


def conditions(status: st.RolloutStatus, generation: int | None) -> list[dict[str, Any]]:
    out = [
        {
            "type": c.type,
            "status": c.status.value,
            "reason": c.reason.value,
            "message": c.message[:32768],
            "lastTransitionTime": st.fmt(c.last_transition),
            "observedGeneration": generation,
        }
        for c in status.conditions
    ]
    succeeded = status.phase is st.RolloutPhase.SUCCEEDED
    out.append(
        {
            "type": "Ready",
            "status": "True" if succeeded else "False",
            "reason": status.phase.value,
            "message": status.message or status.phase.value,
            "lastTransitionTime": st.fmt(status.started_at),
            "observedGeneration": generation,
        }
    )
    return out


def profile_status(
    status: st.RolloutStatus,
    matching: Iterable[str],
    deliveries: Mapping[str, m.Delivery],
    content_hash: str,
    family: Family = families.NATIVE,
    *,
    progress_lists: bool = True,
) -> dict[str, Any]:
    """Sveltos' profile status. `progress_lists` False leaves out `updatingClusters` and
    `updatedClusters` (None: a merge patch removes them), as Sveltos does for a profile without
    maxUpdate: a promotion's stage profile, whose promotion shows the progress (ADR 0145)."""
    started = {c for s in status.stages for c in s.started}
    done = sorted(c for c in started if deliveries.get(c, m.PENDING).done)
    failed = sorted(c for c in started if deliveries.get(c, m.PENDING).phase is m.DeliveryPhase.FAILED)
    updating = sorted(started - set(done) - set(failed))

    def ref(c: str) -> dict[str, str]:
        return cluster_ref(c, family)

    def listed(clusters: list[str]) -> dict[str, Any] | None:
        return {"hash": content_hash, "clusters": [ref(c) for c in clusters]} if progress_lists else None

    return {
        "matchingClusters": [ref(c) for c in sorted(matching)],
        "updatingClusters": listed(updating),
        "updatedClusters": listed(done),
        "failedClusters": [{"clusterRef": ref(c), "failureMessage": deliveries[c].message} for c in failed]
        or None,
    }

"""A profile's Sveltos status (ADR 0145): a plain profile lists the clusters being updated and
updated; a promotion's stage profile lists neither (its promotion shows the progress), while its
matching and failed clusters stay listed."""

from __future__ import annotations

from datetime import UTC, datetime

from fleetwave.controllers.sveltos import rollout_facts as rf
from fleetwave.core import model as m
from fleetwave.core import status as st
from fleetwave.kube.status import merge_patch, normalized

T0 = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)
CLUSTERS = ("fleet/a", "fleet/b", "fleet/c")


def _status() -> st.RolloutStatus:
    stage = st.StageStatus("all", CLUSTERS, 3, started=CLUSTERS)
    return st.RolloutStatus("h", "s", T0, (stage,), dict.fromkeys(CLUSTERS, 0), frozenset(CLUSTERS))


DELIVERIES = {
    "fleet/a": m.Delivery(m.DeliveryPhase.APPLIED, ready=True),
    "fleet/b": m.Delivery(m.DeliveryPhase.APPLYING),
    "fleet/c": m.Delivery(m.DeliveryPhase.FAILED, message="boom"),
}


def _names(listed: dict[str, object]) -> list[str]:
    return [str(ref["name"]) for ref in listed["clusters"]]  # type: ignore[index]


def test_a_plain_profile_lists_the_clusters_being_updated_and_updated() -> None:
    out = rf.profile_status(_status(), CLUSTERS, DELIVERIES, "h")
    assert _names(out["updatedClusters"]) == ["a"]
    assert _names(out["updatingClusters"]) == ["b"]
    assert [f["clusterRef"]["name"] for f in out["failedClusters"]] == ["c"]


def test_a_stage_profile_lists_neither_and_a_patch_removes_lists_written_before() -> None:
    before = normalized(rf.profile_status(_status(), CLUSTERS, DELIVERIES, "h"))
    out = rf.profile_status(_status(), CLUSTERS, DELIVERIES, "h", progress_lists=False)
    assert out["updatedClusters"] is None
    assert out["updatingClusters"] is None
    assert [r["name"] for r in out["matchingClusters"]] == ["a", "b", "c"]
    assert [f["clusterRef"]["name"] for f in out["failedClusters"]] == ["c"]
    patch = merge_patch(before, normalized(out))
    assert patch == {"updatedClusters": None, "updatingClusters": None}

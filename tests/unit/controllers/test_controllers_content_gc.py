"""Which content snapshots are still named, and when one that is not is collected (pure parts of
`controllers.content_gc`), and the anchor that lets a Secret snapshot be collected without the
right to delete a Secret."""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace
from typing import Any

from informer_support import FakeInformer
from lightkube.generic_resource import create_global_resource

from fleetwave.api import families
from fleetwave.controllers.shared.context import Cache
from fleetwave.controllers.sveltos import content, content_gc

NOW = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)
H1, H2, H3, H4 = ("a" * 64, "b" * 64, "c" * 64, "d" * 64)


def test_everything_that_names_a_snapshot_keeps_it() -> None:
    summary = {"metadata": {"annotations": {"fleetwave.io/content": "fw-content-s1"}}}
    stage_profile = {"metadata": {"annotations": {"fleetwave.io/pinned-content": "fw-content-pinned"}}}
    live_profile = {"metadata": {"name": "p"}, "status": {"rollout": {"contentHash": H1}}}
    promotion = {
        "status": {
            "revisions": [
                {"revision": 1, "snapshot": "fw-content-old", "contentHash": H2, "snapshotHash": H2},
                {"revision": 2, "snapshot": "fw-content-s-new", "contentHash": H3, "snapshotHash": H3},
            ]
        }
    }
    named = content_gc.named([stage_profile, live_profile], [summary], [promotion])
    assert named == {
        "fw-content-s1",
        "fw-content-pinned",
        # A profile's current content, whichever kind its snapshot is kept as.
        "fw-content-" + H1[:40],
        "fw-content-s-" + H1[:40],
        "fw-content-old",
        "fw-content-s-new",
    }


def test_objects_without_names_name_nothing() -> None:
    bare = {"metadata": {"name": "x"}}
    assert content_gc.named([bare], [bare], [bare, {"status": {"revisions": "not a list"}}]) == frozenset()


def test_a_named_snapshot_is_looked_at_again_after_the_sweep() -> None:
    old = NOW - dt.timedelta(days=30)
    assert content_gc.wait(old, True, NOW, grace=600) == content_gc.SWEEP_SECONDS
    assert content_gc.wait(old, True, NOW, grace=600, sweep=5) == 5


def test_an_unnamed_snapshot_is_collected_only_past_the_grace() -> None:
    assert content_gc.wait(NOW - dt.timedelta(seconds=601), False, NOW, grace=600) is None
    assert content_gc.wait(NOW - dt.timedelta(seconds=600), False, NOW, grace=600) is None
    assert content_gc.wait(NOW - dt.timedelta(seconds=100), False, NOW, grace=600) == 500
    # A clock behind the API server's never makes it collectable early.
    assert content_gc.wait(NOW + dt.timedelta(seconds=30), False, NOW, grace=600) == 630
    assert content_gc.wait(None, False, NOW, grace=600) == 600


def test_a_secret_snapshot_is_owned_by_its_anchor_configmap() -> None:
    resolved = content.Resolved(H4, {"policies": []}, from_secret=True)
    anchor = content.snapshot_anchor(resolved, "fleetwave-system")
    assert anchor["kind"] == "ConfigMap"
    assert anchor["metadata"]["name"] == resolved.snapshot_name == "fw-content-s-" + H4[:40]
    assert anchor["metadata"]["labels"][content.SNAPSHOT_LABEL] == "snapshot"
    assert anchor["data"] == {}
    secret = content.snapshot_object(resolved, "fleetwave-system", anchor_uid="uid-1")
    assert secret["kind"] == "Secret"
    assert secret["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": resolved.snapshot_name, "uid": "uid-1"}
    ]
    # No blockOwnerDeletion: that would need a right on the anchor's finalizers.
    plain = content.snapshot_object(content.Resolved(H4, {"policies": []}), "fleetwave-system")
    assert "ownerReferences" not in plain["metadata"]


_RESOURCES = {
    kind: create_global_resource("fleetwave.io", "v1alpha1", kind + "Gc", kind.lower() + "gcs")
    for kind in ("ClusterSummary", "ClusterProfile", "ClusterPromotion")
}


def _collector() -> tuple[content_gc.Collector, dict[str, FakeInformer]]:
    informers = {kind: FakeInformer(resource) for kind, resource in _RESOURCES.items()}
    cache = Cache(informers)  # type: ignore[arg-type]
    return content_gc.Collector([SimpleNamespace(family=families.NATIVE, cache=cache)]), informers  # type: ignore[list-item]


def _summary(name: str, snapshot: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "annotations": {"fleetwave.io/content": snapshot}}}


def test_the_collector_finds_what_names_a_snapshot_through_indexes_kept_from_events() -> None:
    collector, informers = _collector()
    summaries = informers["ClusterSummary"]
    summaries.put(_summary("s1", "fw-content-a"))  # before the index exists: read when it is made
    assert collector.is_named("fw-content-a")
    assert not collector.is_named("fw-content-b")

    summaries.put(_summary("s2", "fw-content-b"))
    summaries.put(_summary("s1", "fw-content-b"), event="MODIFIED")  # moved on to the new content
    assert not collector.is_named("fw-content-a")
    assert collector.is_named("fw-content-b")
    summaries.delete("s1")
    assert collector.is_named("fw-content-b")  # s2 still names it
    summaries.delete("s2")
    assert not collector.is_named("fw-content-b")

    informers["ClusterProfile"].put({"metadata": {"name": "p"}, "status": {"rollout": {"contentHash": H1}}})
    assert collector.is_named("fw-content-s-" + H1[:40])
    informers["ClusterPromotion"].put(
        {"metadata": {"name": "r"}, "status": {"revisions": [{"revision": 1, "snapshot": "fw-content-old"}]}}
    )
    assert collector.is_named("fw-content-old")

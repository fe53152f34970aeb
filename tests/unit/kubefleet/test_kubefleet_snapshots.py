"""Cutting indexed snapshots, the latest label and revisionHistoryLimit."""

from __future__ import annotations

from typing import Any

from fleetwave.controllers.kubefleet import naming as nm
from fleetwave.controllers.kubefleet import snapshots

CM = [
    {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "n"},
        "data": {"k": "v1"},
    }
]


def existing(count: int) -> list[dict[str, Any]]:
    out = []
    for i in range(count):
        content = [{**CM[0], "data": {"k": f"old{i}"}}]
        out.append(
            snapshots.snapshot_body(
                "ClusterResourceSnapshot", "p", None, i, content, snapshots.content_hash(content)
            )
        )
        out[-1]["metadata"]["labels"][nm.LATEST_LABEL] = "true" if i == count - 1 else "false"
    return out


def plan(old: list[dict[str, Any]], limit: int = 10) -> snapshots.Plan:
    return snapshots.plan(old, CM, kind="ClusterResourceSnapshot", placement="p", namespace=None, limit=limit)


def test_the_first_snapshot_is_index_0_with_upstream_labels_and_hash() -> None:
    first = plan([])
    assert first.create is not None
    assert first.create["metadata"]["name"] == "p-0-snapshot"
    assert first.create["metadata"]["labels"] == {
        nm.LATEST_LABEL: "true",
        nm.PARENT_LABEL: "p",
        nm.INDEX_LABEL: "0",
    }
    assert first.create["metadata"]["annotations"][nm.HASH_ANNOTATION] == snapshots.content_hash(CM)


def test_a_content_change_cuts_the_next_index_and_unmarks_the_previous_latest() -> None:
    nxt = plan(existing(2))
    assert nxt.create is not None
    assert nxt.create["metadata"]["name"] == "p-2-snapshot"
    assert nxt.unmark == ("p-1-snapshot",)
    assert nxt.latest == 2


def test_unchanged_content_cuts_nothing() -> None:
    same = existing(1)
    same[0] = snapshots.snapshot_body("ClusterResourceSnapshot", "p", None, 0, CM, snapshots.content_hash(CM))
    assert plan(same) == snapshots.Plan(latest=0)


def test_history_is_trimmed_oldest_first_to_the_limit() -> None:
    nxt = plan(existing(3), limit=2)
    assert nxt.delete == ("p-0-snapshot", "p-1-snapshot")  # 2 kept: p-2 and the new p-3


def test_snapshots_are_ordered_by_index_not_name() -> None:
    many = existing(11)
    ordered = snapshots.of_placement(list(reversed(many)), "p", None)
    assert [snapshots.index_of(s) for s in ordered] == list(range(11))

"""What the controllers derive from whole kinds is kept until the kind changes: the cache's memo
(keyed by informer revisions), its label index, and specs parsed once per resourceVersion."""

from __future__ import annotations

from typing import Any

import pytest
from informer_support import FakeInformer
from lightkube.generic_resource import create_global_resource

from fleetwave.api.sveltos import ClusterProfile
from fleetwave.controllers.shared.context import Cache
from fleetwave.controllers.sveltos import rollout_common, summary_writes

Summary = create_global_resource("fleetwave.io", "v1alpha1", "ClusterSummaryT", "clustersummariest")


def _labelled(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}}


def test_memo_rebuilds_only_when_the_kind_changed() -> None:
    informer = FakeInformer(Summary)
    cache = Cache({"ClusterSummary": informer})  # type: ignore[dict-item]
    builds: list[int] = []

    def build() -> int:
        builds.append(len(informer.store))
        return len(informer.store)

    assert cache.memo("n", "ClusterSummary", build) == 0
    assert cache.memo("n", "ClusterSummary", build) == 0
    informer.put(_labelled("a", {}))
    assert cache.memo("n", "ClusterSummary", build) == 1
    assert builds == [0, 1]


def test_memo_counts_the_peers_changes_when_asked_to() -> None:
    mine, theirs = FakeInformer(Summary), FakeInformer(Summary)
    cache, peer = Cache({"ClusterSummary": mine}), Cache({"ClusterSummary": theirs})  # type: ignore[dict-item]
    cache.peers = [peer]
    calls = []
    cache.memo("everywhere", "ClusterSummary", lambda: calls.append(1), everywhere=True)
    theirs.put(_labelled("x", {}))
    cache.memo("everywhere", "ClusterSummary", lambda: calls.append(1), everywhere=True)
    cache.memo("mine only", "ClusterSummary", lambda: calls.append(1))
    theirs.put(_labelled("y", {}))
    cache.memo("mine only", "ClusterSummary", lambda: calls.append(1))
    assert len(calls) == 3  # the peer's second change does not concern "mine only"


def test_labelled_follows_adds_relabels_and_deletes() -> None:
    informer = FakeInformer(Summary)
    informer.put(_labelled("before-index", {"profile": "p"}))
    cache = Cache({"ClusterSummary": informer})  # type: ignore[dict-item]

    def names(value: str) -> list[str]:
        return [o["metadata"]["name"] for o in cache.labelled("ClusterSummary", "profile", value)]

    assert names("p") == ["before-index"]
    informer.put(_labelled("b", {"profile": "p"}))
    informer.put(_labelled("c", {"profile": "q"}))
    assert names("p") == ["b", "before-index"]
    informer.put(_labelled("b", {"profile": "q"}), event="MODIFIED")
    assert names("p") == ["before-index"]
    assert names("q") == ["b", "c"]
    informer.delete("c")
    assert names("q") == ["b"]


def _profile(rv: str, max_update: str) -> dict[str, Any]:
    return {
        "apiVersion": "fleetwave.io/v1alpha1",
        "kind": "ClusterProfile",
        "metadata": {"name": "p", "uid": "u1", "resourceVersion": rv},
        "spec": {"maxUpdate": max_update, "clusterSelector": {"matchLabels": {"env": "dev"}}},
    }


def test_a_spec_is_parsed_once_per_content_whatever_its_status_and_version() -> None:
    first = rollout_common.parse_as(_profile("1", "10%"), "ClusterProfile", ClusterProfile)
    again = rollout_common.parse_as(_profile("1", "10%"), "ClusterProfile", ClusterProfile)
    # A status write moves the resourceVersion and nothing the model holds: not parsed again.
    written = {**_profile("2", "10%"), "status": {"matchingClusters": [{"name": "a"}]}}
    after_status = rollout_common.parse_as(written, "ClusterProfile", ClusterProfile)
    changed = rollout_common.parse_as(_profile("3", "50%"), "ClusterProfile", ClusterProfile)
    labelled = _profile("4", "10%")
    labelled["metadata"]["annotations"] = {"fleetwave.io/hold-clusters": "ns/a"}
    assert again is first
    assert after_status is first
    assert after_status.status is None  # controllers read status from the raw object
    assert changed is not first
    assert changed.spec.max_update == "50%"
    held = rollout_common.parse_as(labelled, "ClusterProfile", ClusterProfile)
    assert held is not first
    assert held.metadata.annotations == {"fleetwave.io/hold-clusters": "ns/a"}


def test_a_new_version_with_the_same_body_is_found_without_serialising_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def versioned(rv: str, max_update: str, labels: dict[str, str]) -> dict[str, Any]:
        raw = _profile(rv, max_update)
        raw["metadata"].update({"uid": "u-versions", "generation": 1, "labels": labels})
        return raw

    first = rollout_common.parse_as(versioned("1", "10%", {}), "ClusterProfile", ClusterProfile)
    serialised: list[object] = []
    real_dumps = rollout_common.json.dumps

    def dumps(value: object, **options: Any) -> str:
        serialised.append(value)
        return real_dumps(value, **options)

    monkeypatch.setattr(rollout_common.json, "dumps", dumps)
    # A status write: a new resourceVersion, the same body.
    written = {**versioned("2", "10%", {}), "status": {"matchingClusters": [{"name": "a"}]}}
    assert rollout_common.parse_as(written, "ClusterProfile", ClusterProfile) is first
    assert serialised == []
    # Another spec or other labels, under the same generation (a body written ahead keeps the
    # live one): content of its own.
    changed = rollout_common.parse_as(versioned("3", "50%", {}), "ClusterProfile", ClusterProfile)
    relabelled = rollout_common.parse_as(
        versioned("4", "10%", {"env": "a"}), "ClusterProfile", ClusterProfile
    )
    assert changed.spec.max_update == "50%"
    assert relabelled.metadata.labels == {"env": "a"}
    assert len(serialised) == 2


def test_the_spec_a_summary_carries_does_not_change_when_a_stage_admits_more_clusters() -> None:
    def stage_profile(refs: list[str], rv: str) -> ClusterProfile:
        raw = _profile(rv, "10%")
        del raw["spec"]["clusterSelector"]
        raw["spec"]["clusterRefs"] = [{"namespace": "ns", "name": r} for r in refs]
        return rollout_common.parse_as(raw, "ClusterProfile", ClusterProfile)

    one, two = stage_profile(["a"], "10"), stage_profile(["a", "b"], "11")
    assert summary_writes.summary_spec(one) == summary_writes.summary_spec(two)
    assert "clusterRefs" not in summary_writes.summary_spec(two)
    assert summary_writes.summary_spec(two)["maxUpdate"] == "10%"


def test_one_version_of_an_object_is_parsed_and_hashed_once(monkeypatch: Any) -> None:
    parses: list[str] = []
    real = rollout_common._parse

    def counting(raw: Any, kind: str, model: Any) -> Any:
        parses.append(raw["metadata"]["resourceVersion"])
        return real(raw, kind, model)

    monkeypatch.setattr(rollout_common, "_parse", counting)
    profile = _profile("41", "10%")
    profile["metadata"]["uid"] = "uid-41"
    first = rollout_common.parse_as(profile, "ClusterProfile", ClusterProfile)
    again = rollout_common.parse_as(dict(profile), "ClusterProfile", ClusterProfile)
    moved = {**profile, "metadata": {**profile["metadata"], "resourceVersion": "42"}}
    after = rollout_common.parse_as(moved, "ClusterProfile", ClusterProfile)
    assert parses == ["41", "42"]  # the second read of version 41 parsed and hashed nothing
    assert again is first
    assert after is first  # same content: the model parsed before

"""The ClusterSet/Set controller (ADR 0108): one pass reads the fleet, chooses (pure), writes the
status in upstream's shape once, and says what changed in an Event."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

from lightkube import ApiError
from lightkube.models import meta_v1

from fleetwave.api import families
from fleetwave.api.families import Family
from fleetwave.api.sveltos import ClusterProfile
from fleetwave.controllers.shared.context import Context
from fleetwave.controllers.shared.status_writer import StatusWriter, Whose
from fleetwave.controllers.sveltos import cluster_sets, rollout_common
from fleetwave.core import selectors
from fleetwave.translate import KEY_LABEL

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)


class _Obj:
    def __init__(self, body: dict[str, Any]) -> None:
        self._body = body
        self.metadata = SimpleNamespace(**{"namespace": None, "deletionTimestamp": None, **body["metadata"]})
        self.status = body.get("status")

    def to_dict(self) -> dict[str, Any]:
        return self._body


def _member(name: str, *, ready: bool = True, paused: bool = False, why: str = "") -> dict[str, Any]:
    return {
        "apiVersion": "fleetwave.io/v1alpha1",
        "kind": "MemberCluster",
        "metadata": {"name": name, "namespace": "civo", "labels": {"env": "prod"}},
        "spec": {"paused": paused},
        "status": {"ready": ready, "failureMessage": why},
    }


def _cluster_set(status: dict[str, Any] | None = None, version: str = "5") -> _Obj:
    return _Obj(
        {
            "apiVersion": "lib.projectsveltos.io/v1beta1",
            "kind": "ClusterSet",
            # a uid of its own: a cached status is normalised once per uid and version
            "metadata": {"name": "prod", "uid": str(uuid.uuid4()), "resourceVersion": version},
            "spec": {"clusterSelector": {"matchLabels": {"env": "prod"}}, "maxReplicas": 1},
            "status": status or {},
        }
    )


@dataclass
class _Cache:
    sets: dict[str, _Obj]
    members: list[dict[str, Any]]
    family: Family = families.SVELTOS
    informers: dict[str, Any] = field(default_factory=dict)

    def obj(self, kind: str, namespace: str | None, name: str) -> Any:
        return self.sets.get(name) if kind == "ClusterSet" else None

    def list(self, kind: str) -> list[dict[str, Any]]:
        return list(self.members) if kind == "MemberCluster" else []

    def memo(self, name: str, kind: str, build: Any, *, everywhere: bool = False) -> Any:
        return build()

    def has(self, kind: str) -> bool:
        return kind in ("ClusterSet", "MemberCluster")


@dataclass
class _Client:
    conflict: bool = False
    patches: list[Any] = field(default_factory=list)

    async def patch(self, resource: Any, name: str, body: Any, **_: Any) -> Any:
        self.patches.append((resource, name, body))
        if self.conflict:
            raise ApiError(status=meta_v1.Status(code=409, message="conflict"))
        return None


class _Ctx(Context):
    async def event(self, obj: Any, warning: bool, reason: str, message: str) -> None:
        self.recorder.append((warning, reason, message))  # type: ignore[attr-defined]


def _ctx(cache: _Cache, client: _Client, statuses: StatusWriter | None = None) -> _Ctx:
    return _Ctx(
        client=client,  # type: ignore[arg-type]
        cache=cache,  # type: ignore[arg-type]
        recorder=[],  # type: ignore[arg-type]
        helm=None,  # type: ignore[arg-type]
        health=None,  # type: ignore[arg-type]
        namespace="fleetwave-system",
        clock=lambda: T0,
        statuses=statuses or StatusWriter(),
    )


def _ref(name: str) -> dict[str, str]:
    return {
        "apiVersion": "lib.projectsveltos.io/v1beta1",
        "kind": "SveltosCluster",
        "namespace": "civo",
        "name": name,
    }


async def _pass(cache: _Cache, client: _Client | None = None) -> tuple[_Client, list[Any], Any]:
    client = client or _Client()
    ctx = _ctx(cache, client)
    result = await cluster_sets.reconcile(ctx, "ClusterSet", "prod")
    return client, ctx.recorder, result  # type: ignore[return-value]


async def test_a_set_chooses_a_ready_cluster_and_writes_upstreams_status_shape() -> None:
    cache = _Cache({"prod": _cluster_set()}, [_member("cluster1"), _member("cluster2")])
    client, events, result = await _pass(cache)
    ((resource, name, body),) = client.patches
    assert (resource.__name__, name) == ("ClusterSetStatus", "prod")
    assert body["metadata"] == {"resourceVersion": "5"}
    assert body["status"] == {
        "matchingClusterRefs": [_ref("cluster1"), _ref("cluster2")],
        "selectedClusterRefs": [_ref("cluster1")],
    }
    assert events == [(False, cluster_sets.CHANGED, "chose civo/cluster1")]
    assert not result.requeue
    assert result.requeue_after is None


async def test_a_chosen_cluster_that_turns_not_ready_is_replaced_and_the_event_says_why() -> None:
    chosen = {
        "matchingClusterRefs": [_ref("cluster1"), _ref("cluster2")],
        "selectedClusterRefs": [_ref("cluster1")],
    }
    members = [_member("cluster1", ready=False, why="API server unreachable"), _member("cluster2")]
    client, events, _ = await _pass(_Cache({"prod": _cluster_set(chosen)}, members))
    ((_, _, body),) = client.patches
    assert body["status"] == {"selectedClusterRefs": [_ref("cluster2")]}  # the merge patch of the change
    assert events == [
        (
            False,
            cluster_sets.CHANGED,
            "let go of civo/cluster1 (not ready: API server unreachable); chose civo/cluster2",
        )
    ]


async def test_a_paused_chosen_cluster_is_replaced_and_nothing_ready_leaves_the_set_short() -> None:
    chosen = {"matchingClusterRefs": [_ref("cluster1")], "selectedClusterRefs": [_ref("cluster1")]}
    members = [_member("cluster1", paused=True)]
    client, events, _ = await _pass(_Cache({"prod": _cluster_set(chosen)}, members))
    ((_, _, body),) = client.patches
    assert body["status"] == {"selectedClusterRefs": None}  # removed: upstream omits an empty list
    assert events == [
        (
            False,
            cluster_sets.CHANGED,
            "let go of civo/cluster1 (not ready: paused); 0 of maxReplicas 1 chosen (0 matching ready)",
        )
    ]


async def test_an_unchanged_choice_writes_nothing_and_says_nothing() -> None:
    chosen = {
        "matchingClusterRefs": [_ref("cluster1"), _ref("cluster2")],
        "selectedClusterRefs": [_ref("cluster2")],
    }
    cache = _Cache({"prod": _cluster_set(chosen)}, [_member("cluster1"), _member("cluster2")])
    client, events, _ = await _pass(cache)
    assert client.patches == []
    assert events == []


async def test_a_conflict_decides_again_from_the_newer_state() -> None:
    cache = _Cache({"prod": _cluster_set()}, [_member("cluster1")])
    _, events, result = await _pass(cache, _Client(conflict=True))
    assert result.requeue
    assert events == []


async def test_a_pass_behind_its_own_last_write_waits_for_the_cache() -> None:
    cache = _Cache({"prod": _cluster_set(version="5")}, [_member("cluster1")])
    statuses = StatusWriter()
    statuses.own.record(Whose("ClusterSet", "prod"), "9")
    client = _Client()
    result = await cluster_sets.reconcile(_ctx(cache, client, statuses), "ClusterSet", "prod")
    assert result.requeue_after == 1.0
    assert client.patches == []


async def test_a_deleted_or_missing_set_is_left_alone() -> None:
    deleting = _cluster_set()
    deleting.metadata.deletionTimestamp = "2026-11-22T09:00:00Z"
    for sets in ({}, {"prod": deleting}):
        client, events, result = await _pass(_Cache(sets, [_member("cluster1")]))
        assert client.patches == []
        assert events == []
        assert not result.requeue


def test_a_long_change_names_ten_clusters_and_counts_the_rest() -> None:
    matching: Mapping[str, bool] = {f"n/c{i:02d}": True for i in range(30)}
    choice = cluster_sets.Choice(matching, (), tuple(sorted(matching))[:25])
    fleet = SimpleNamespace(by_name={})
    text = cluster_sets.describe(choice, fleet, 25)  # type: ignore[arg-type]
    assert text.startswith("chose n/c00, ")
    assert text.endswith("(and 15 more)")


@dataclass
class _SetsCache:
    """A cache holding ClusterSets only, in native form."""

    sets: dict[str, dict[str, Any]]
    informers: dict[str, Any] = field(default_factory=lambda: {"ClusterSet": object()})

    def get(self, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        assert kind == "ClusterSet"
        assert namespace is None
        return self.sets.get(name)


def test_a_profiles_engine_view_follows_what_its_cluster_sets_chose() -> None:
    """The one translation the profile's pass, its summaries and a promotion's write-ahead share."""
    profile = ClusterProfile.model_validate(
        {"metadata": {"name": "p"}, "spec": {"setRefs": ["prod", "missing"], "clusterRefs": [{"name": "x"}]}}
    )

    def chose(*names: str) -> dict[str, Any]:
        refs = [{"namespace": "civo", "name": n} for n in names]
        return {"metadata": {"name": "prod"}, "status": {"selectedClusterRefs": refs}}

    cache = _SetsCache({"prod": chose("cluster1")})
    selector = rollout_common.profile_rollout(cache, profile).stages[0].selector  # type: ignore[arg-type]
    assert selectors.matches(selector, {KEY_LABEL: "civo/cluster1"})
    assert selectors.matches(selector, {KEY_LABEL: "default/x"})  # its own clusterRefs still count
    cache.sets["prod"] = chose("cluster2")
    selector = rollout_common.profile_rollout(cache, profile).stages[0].selector  # type: ignore[arg-type]
    assert not selectors.matches(selector, {KEY_LABEL: "civo/cluster1"})
    assert selectors.matches(selector, {KEY_LABEL: "civo/cluster2"})
    no_sets = _SetsCache({"prod": chose("cluster2")}, informers={})  # a family without cluster sets
    alone = rollout_common.profile_rollout(no_sets, profile).stages[0].selector  # type: ignore[arg-type]
    assert not selectors.matches(alone, {KEY_LABEL: "civo/cluster2"})


async def test_a_cluster_ref_naming_no_kind_of_cluster_is_said_by_field_and_matches_nothing() -> None:
    bad = _cluster_set()
    bad._body["spec"] = {"clusterRefs": [{"kind": "Secret", "namespace": "civo", "name": "cluster1"}]}
    _client, events, _ = await _pass(_Cache({"prod": bad}, [_member("cluster1")]))
    assert (True, "ClusterRefInvalid") in [(warning, reason) for warning, reason, _ in events]
    said = next(message for _, reason, message in events if reason == "ClusterRefInvalid")
    assert said.startswith("spec.clusterRefs[0].kind: Secret is not a kind of cluster")
    assert not any(reason == cluster_sets.CHANGED for _, reason, _ in events)  # it chose nothing

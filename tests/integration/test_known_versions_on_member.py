"""An object this process applied before is applied over the version that apply returned, without
reading it first, on a real member; whatever changed it since (another manager, a takeover, a
deletion) is refused by the version precondition and judged on a fresh read, as without it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest
from lightkube import Client
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import ConfigMap, Namespace
from lightkube.types import PatchType

from fleetwave.controllers.fleet.member_watches import Interest, MemberWatches
from fleetwave.delivery import manifests
from fleetwave.delivery.known_versions import KnownVersions
from fleetwave.delivery.target import MemberTarget
from fleetwave.health import readiness
from fleetwave.kube import internals
from fleetwave.local import fleet


@pytest.fixture
def target(local_fleet: fleet.FleetState) -> MemberTarget:
    member = local_fleet.members[0]
    return MemberTarget.from_file(member.name, member.kubeconfig)


def _configmap(namespace: str, tier: tuple[int, int] | None = None, **data: str) -> dict[str, Any]:
    obj = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "settings", "namespace": namespace},
        "data": data,
    }
    return manifests.with_tier(obj, tier) if tier else obj


async def _requests(target: MemberTarget) -> list[tuple[str, str]]:
    """Every request the member's pooled client makes from now on: (method, path)."""
    seen: list[tuple[str, str]] = []

    async def record(request: httpx2.Request) -> None:
        seen.append((request.method, request.url.path))

    async with target.session() as client:
        internals.raw_http(client).event_hooks["request"].append(record)
    return seen


async def test_an_object_applied_before_is_applied_over_its_known_version_without_a_read(
    target: MemberTarget, members: dict[str, Client], namespace: str
) -> None:
    member = members[target.name]
    known = KnownVersions()
    seen = await _requests(target)
    cm_path = f"/api/v1/namespaces/{namespace}/configmaps/settings"
    ns_name = f"{namespace}-kv"
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns_name}}
    try:
        first = await manifests.apply(
            target, [ns, _configmap(namespace, v="1")], inventory="s/kv", known=known
        )
        assert first.ok, first.errors
        assert ("GET", cm_path) in seen  # nothing known yet: read first
        assert len(known) == 2  # the ConfigMap and the Namespace (Active: nothing moves it)

        seen.clear()
        second = await manifests.apply(
            target, [ns, _configmap(namespace, v="2")], inventory="s/kv", known=known
        )
        assert [(o.ref.kind, o.action) for o in second.objects] == [
            ("Namespace", "unchanged"),
            ("ConfigMap", "configured"),
        ]
        assert [m for m, p in seen if p == cm_path] == ["PATCH"]  # applied, never read
        assert ("GET", f"/api/v1/namespaces/{ns_name}") not in seen

        # Another manager adds a label: the known version is refused, the object read and applied
        # over what is there now (their label stays).
        member.patch(
            ConfigMap,
            "settings",
            {"metadata": {"labels": {"team": "theirs"}}},
            namespace=namespace,
            patch_type=PatchType.MERGE,
        )
        seen.clear()
        third = await manifests.apply(target, [_configmap(namespace, v="3")], inventory="s/kv", known=known)
        assert third.ok, third.errors
        assert [m for m, p in seen if p == cm_path] == ["PATCH", "GET", "PATCH"]
        live = member.get(ConfigMap, "settings", namespace=namespace)
        assert live.data == {"v": "3"}
        assert (live.metadata.labels or {})["team"] == "theirs"  # type: ignore[union-attr]

        # A lower tier takes it over: the known version is stale, and the fresh read says whose it is.
        taken = await manifests.apply(target, [_configmap(namespace, (50, 100), v="x")], inventory="s/low")
        assert taken.ok, taken.errors
        fourth = await manifests.apply(target, [_configmap(namespace, v="4")], inventory="s/kv", known=known)
        assert [o.action for o in fourth.objects] == ["conflict"]
        assert "already deployed by s/low" in fourth.conflicts[0]
        assert member.get(ConfigMap, "settings", namespace=namespace).data == {"v": "x"}
        # A conflict is judged on a read again next time (the Namespace, untouched, stays known).
        assert len(known) == 1

        # Deleted since our last apply: created again.
        mine = await manifests.apply(
            target, [_configmap(namespace, (10, 100), v="5")], inventory="s/kv", known=known
        )
        assert mine.ok, mine.errors
        member.delete(ConfigMap, "settings", namespace=namespace)
        seen.clear()
        fifth = await manifests.apply(
            target, [_configmap(namespace, (10, 100), v="6")], inventory="s/kv", known=known
        )
        assert [o.action for o in fifth.objects] == ["created"]
        assert [m for m, p in seen if p == cm_path] == ["PATCH"]  # created over the old version
        assert member.get(ConfigMap, "settings", namespace=namespace).data == {"v": "6"}
    finally:
        member.delete(Namespace, ns_name)


async def test_registrations_of_one_cluster_delivering_one_object_at_once_take_turns(
    target: MemberTarget, members: dict[str, Client], namespace: str
) -> None:
    # Five registrations of one cluster under one profile (ADR 0066): one owner, five inventories.
    # At once over the version known before, four of five were refused and read again; in turn,
    # each applies over the version the one before it returned: one apply each, nothing read.
    member = members[target.name]
    known = KnownVersions()
    owner = "ClusterProfile/web"
    inventories = [f"summary/fleet/web-{i}" for i in range(5)]
    first = await manifests.apply(
        target, [_configmap(namespace, v="1")], inventory=inventories[0], owner=owner, known=known
    )
    assert first.ok, first.errors
    seen = await _requests(target)
    cm_path = f"/api/v1/namespaces/{namespace}/configmaps/settings"
    reports = await asyncio.gather(
        *(
            manifests.apply(target, [_configmap(namespace, v="2")], inventory=i, owner=owner, known=known)
            for i in inventories
        )
    )
    assert all(r.ok for r in reports), [r.errors for r in reports]
    assert [m for m, p in seen if p == cm_path] == ["PATCH"] * 5
    live = member.get(ConfigMap, "settings", namespace=namespace)
    assert live.data == {"v": "2"}
    kept = known.get(target.pool_key(), reports[-1].objects[0].ref)
    assert kept is not None
    assert kept["metadata"]["resourceVersion"] == live.metadata.resourceVersion  # type: ignore[union-attr]


async def _rolled_out(member: Client, namespace: str) -> None:
    for _ in range(300):
        live = member.get(Deployment, "watched", namespace=namespace).to_dict()
        if readiness.is_ready({"apiVersion": "apps/v1", "kind": "Deployment", **live})[0]:
            return
        await asyncio.sleep(0.1)
    pytest.fail("the Deployment never rolled out")


def _deployment(namespace: str, image: str) -> dict[str, Any]:
    labels = {"app": "watched"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "watched", "namespace": namespace},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "app", "image": image}]},
            },
        },
    }


def _settled(live: dict[str, Any]) -> bool:
    """Rolled out, and no status write to come: an old replica's pod still terminating is ready by
    our judge, but its controller writes `terminatingReplicas` again once the pod is gone (seen on
    a loaded machine; reproduced by pausing the member's kwok during a rollout)."""
    obj = {"apiVersion": "apps/v1", "kind": "Deployment", **live}
    status = live.get("status") or {}
    progressing = [c for c in status.get("conditions") or [] if c.get("type") == "Progressing"]
    complete = bool(progressing) and progressing[0].get("reason") == "NewReplicaSetAvailable"
    return readiness.is_ready(obj)[0] and complete and not status.get("terminatingReplicas")


@contextlib.asynccontextmanager
async def _watched_deployments(
    target: MemberTarget, namespace: str
) -> AsyncIterator[tuple[MemberWatches, KnownVersions]]:
    """A member watch of the namespace's Deployments, listed (it sees what comes next), and known
    versions that take objects from it."""
    watches = MemberWatches()
    listed = asyncio.Event()
    watches.subscribe(target, [Interest("apps/v1", "Deployment", namespace)], "test", listed.set)
    try:
        await asyncio.wait_for(listed.wait(), 30)
        yield watches, KnownVersions(watched=watches.latest)
    finally:
        await watches.close()


async def _rolled_out_and_seen(
    member: Client, watches: MemberWatches, target: MemberTarget, ref: Any, namespace: str
) -> dict[str, Any]:
    """The Deployment once rolled out and settled (nothing writes it after that) and seen by the
    watch at its current version."""
    for _ in range(300):
        live = member.get(Deployment, "watched", namespace=namespace).to_dict()
        seen = watches.latest(target.pool_key(), ref)
        if (
            _settled(live)
            and seen
            and seen["metadata"]["resourceVersion"] == live["metadata"]["resourceVersion"]
        ):
            return live
        await asyncio.sleep(0.1)
    pytest.fail("the Deployment never rolled out, or the member watch never saw it")


async def test_an_object_created_with_an_empty_status_is_applied_over_the_version_its_watch_saw(
    target: MemberTarget, members: dict[str, Client], namespace: str
) -> None:
    # The API server returns a Deployment it has just created with `status: {}`, kept as settled;
    # its controller writes the status next. Over the creation's version the next apply was
    # refused, then read again and applied: a member watch that saw the status write knows better.
    member = members[target.name]
    path = f"/apis/apps/v1/namespaces/{namespace}/deployments/watched"
    async with _watched_deployments(target, namespace) as (watches, known):
        created = await manifests.apply(
            target, [_deployment(namespace, "registry.k8s.io/pause:3.8")], inventory="s/w", known=known
        )
        assert [o.action for o in created.objects] == ["created"]
        live = created.objects[0].live
        assert live is not None
        assert live.get("status") == {}
        # The watch saw the status the controller wrote after the creation.
        now = await _rolled_out_and_seen(member, watches, target, created.objects[0].ref, namespace)
        assert now["metadata"]["resourceVersion"] != live["metadata"]["resourceVersion"]  # stale
        requests = await _requests(target)
        second = await manifests.apply(
            target, [_deployment(namespace, "registry.k8s.io/pause:3.9")], inventory="s/w", known=known
        )
        assert [o.action for o in second.objects] == ["configured"]
        assert [m for m, p in requests if p == path] == ["PATCH"]  # never refused, never read


async def test_an_object_with_status_is_applied_over_the_version_its_member_watch_saw(
    target: MemberTarget, members: dict[str, Client], namespace: str
) -> None:
    # A Deployment's controller writes its status after every apply: the version our apply returned
    # is stale at once, and the object used to be read before each apply. A member watch that saw
    # the status writes knows the current version: applied over it, nothing read.
    member = members[target.name]
    path = f"/apis/apps/v1/namespaces/{namespace}/deployments/watched"
    async with _watched_deployments(target, namespace) as (watches, known):
        # Created, then applied again once its status is written: that apply returns it with status.
        for image in ("registry.k8s.io/pause:3.8", "registry.k8s.io/pause:3.9"):
            first = await manifests.apply(
                target, [_deployment(namespace, image)], inventory="s/w", known=known
            )
            assert first.ok, first.errors
            ref = first.objects[0].ref
            await _rolled_out(member, namespace)
        await _rolled_out_and_seen(member, watches, target, ref, namespace)
        known.watched = None
        assert known.get(target.pool_key(), ref) is None  # what our apply returned is stale: not used
        known.watched = watches.latest

        requests = await _requests(target)
        second = await manifests.apply(
            target, [_deployment(namespace, "registry.k8s.io/pause:3.10")], inventory="s/w", known=known
        )
        assert [o.action for o in second.objects] == ["configured"]
        assert [m for m, p in requests if p == path] == ["PATCH"]  # applied, never read
        image = member.get(Deployment, "watched", namespace=namespace).spec.template.spec.containers[0].image  # type: ignore[union-attr]
        assert image == "registry.k8s.io/pause:3.10"

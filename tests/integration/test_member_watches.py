"""Member watches on the real fleet (ADR 0065): a stream on a member wakes its subscriber on a change,
and with the judgement poll set to ten minutes, health gates of profiles, promotions and staged runs
still open as soon as the member changes, which only a watch can make happen."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from lightkube import Client, codecs
from promotion_support import (
    ControllerThread,
    registered,
    running_controller,
    stage_phases,
    wait_for,
)

from fleetwave.controllers.fleet.member_watches import Interest, MemberWatches
from fleetwave.delivery.target import MemberTarget
from fleetwave.kube import kinds
from fleetwave.local import binaries, fleet
from fleetwave.mgmt import manifests

NO_POLL = 600.0  # longer than any wait below: a gate that opens was woken by a member watch
WAIT = 90.0

GATE_LUA = """
function evaluate()
  if obj.data ~= nil and obj.data.go == "yes" then
    return {healthy = true, message = "gate open"}
  end
  return {healthy = false, message = "gate closed"}
end
"""


def test_a_stream_wakes_its_subscriber_when_a_watched_kind_changes_on_the_member(
    local_fleet: fleet.FleetState, members: dict[str, Client], namespace: str
) -> None:
    """One namespace, every namespace, a cluster-scoped kind, and a kind the member does not serve."""
    member = local_fleet.cluster("member-1")
    woken = {key: threading.Event() for key in ("here", "everywhere", "namespaces", "unknown")}
    interests = {
        "here": Interest("v1", "ConfigMap", namespace),
        "everywhere": Interest("v1", "ConfigMap", None),
        "namespaces": Interest("v1", "Namespace", None),
        # Not served: the stream retries quietly, the controller is unharmed.
        "unknown": Interest("example.com/v1", "Nothing", None),
    }

    async def until(keys: tuple[str, ...]) -> None:
        for _ in range(int(WAIT * 10)):
            if all(woken[k].is_set() for k in keys):
                return
            await asyncio.sleep(0.1)

    async def scenario() -> tuple[int, int]:
        watches = MemberWatches()
        target = MemberTarget.from_file("member-1", member.kubeconfig)
        for key, interest in interests.items():
            watches.subscribe(target, [interest], key, woken[key].set)
        # A new stream wakes once it has listed (what changed before it watched); then only on changes.
        served = ("here", "everywhere", "namespaces")
        await until(served)
        assert all(woken[k].is_set() for k in served), "a new stream did not wake after listing"
        for key in served:
            woken[key].clear()
        changed = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "changed", "namespace": namespace},
        }
        await asyncio.to_thread(members["member-1"].create, codecs.from_dict(changed))
        await until(("here", "everywhere"))
        ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"{namespace}-extra"}}
        await asyncio.to_thread(members["member-1"].create, codecs.from_dict(ns))
        await until(("namespaces",))
        await asyncio.to_thread(
            members["member-1"].delete, codecs.from_dict(ns).__class__, f"{namespace}-extra"
        )
        streams = watches.streams()
        await watches.close()
        return streams, watches.streams()

    streams, after_close = asyncio.run(scenario())
    assert woken["here"].is_set(), "the ConfigMap created in the namespace did not wake its subscriber"
    assert woken["everywhere"].is_set(), "nor the one watching every namespace"
    assert woken["namespaces"].is_set(), "the namespace created did not wake the cluster-scoped stream"
    assert not woken["unknown"].is_set()  # it never listed, so it never woke
    assert streams == 4
    assert after_close == 0


def policy(name: str, objects: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default"},
        "data": {"content.yaml": yaml.safe_dump_all(objects)},
    }


def gate(namespace: str, go: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "gate", "namespace": namespace},
        "data": {"go": go},
    }


def gate_check(namespace: str) -> dict[str, Any]:
    return {
        "name": "gate-open",
        "featureID": "Resources",
        "group": "",
        "version": "v1",
        "kind": "ConfigMap",
        "namespace": namespace,
        "resourceName": "gate",
        "script": GATE_LUA,
    }


def open_gate(member: Client, namespace: str) -> None:
    member.apply(codecs.from_dict(gate(namespace, "yes")), field_manager="operator", force=True)


@pytest.fixture(scope="module")
def controller(
    local_fleet: fleet.FleetState, management: Client, bins: binaries.Binaries
) -> Iterator[ControllerThread]:
    with (
        registered(management, local_fleet),
        running_controller(local_fleet, bins.path("helm"), "watches", judge_poll_seconds=NO_POLL) as thread,
    ):
        yield thread


def summary_ready(management: Client, profile: str, cluster: str) -> dict[str, Any] | None:
    for s in management.list(
        kinds.resource("ClusterSummary"), namespace="*", labels={"fleetwave.io/cluster-profile": profile}
    ):
        if s.spec["clusterName"] == cluster:
            return next((c for c in (s.status or {}).get("conditions", []) if c["type"] == "Ready"), None)
    return None


def test_a_profile_health_check_passes_as_soon_as_the_member_changes(
    controller: ControllerThread, management: Client, members: dict[str, Client], namespace: str
) -> None:
    name = "watched-profile"
    manifests.apply(management, [policy(name, [gate(namespace, "no")])])
    profile = {
        "apiVersion": "fleetwave.io/v1alpha1",
        "kind": "ClusterProfile",
        "metadata": {"name": name},
        "spec": {
            "clusterSelector": {"matchLabels": {"env": "dev"}},
            "policyRefs": [{"kind": "ConfigMap", "name": name, "namespace": "default"}],
            "validateHealths": [gate_check(namespace)],
        },
    }
    manifests.apply(management, [profile])
    try:
        closed = wait_for(
            lambda: (
                (r := summary_ready(management, name, "member-1")) and "gate closed" in r["message"] and r
            ),
            what="the gate judged closed",
        )
        assert closed["status"] == "False"
        open_gate(members["member-1"], namespace)
        opened = wait_for(
            lambda: (r := summary_ready(management, name, "member-1")) and r["status"] == "True" and r,
            timeout=WAIT,
            what="the gate judged open (woken by the member watch: the poll is 10 minutes)",
            explain=lambda: f"Ready: {summary_ready(management, name, 'member-1')}",
        )
        assert "health checks passing: gate-open" in opened["message"]
    finally:
        management.delete(kinds.resource("ClusterProfile"), name)
        wait_for(lambda: summary_ready(management, name, "member-1") is None, what="withdrawn")


def test_a_promotion_post_delay_check_opens_the_next_stage_as_soon_as_the_member_changes(
    controller: ControllerThread, management: Client, members: dict[str, Client], namespace: str
) -> None:
    name = "watched-promotion"
    marker = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace}}
    manifests.apply(management, [policy(name, [marker])])
    members["member-1"].create(codecs.from_dict(gate(namespace, "no")))
    promotion = {
        "apiVersion": "fleetwave.io/v1alpha1",
        "kind": "ClusterPromotion",
        "metadata": {"name": name},
        "spec": {
            "profileSpec": {"policyRefs": [{"kind": "ConfigMap", "name": name, "namespace": "default"}]},
            "stages": [
                {
                    "name": "dev",
                    "clusterSelector": {"matchLabels": {"env": "dev"}},
                    "trigger": {"auto": {"delay": "0s", "postDelayHealthChecks": [gate_check(namespace)]}},
                },
                {"name": "staging", "clusterSelector": {"matchLabels": {"env": "staging"}}},
            ],
        },
    }
    manifests.apply(management, [promotion])
    try:
        wait_for(
            lambda: "gate closed" in str(management.get(kinds.resource("ClusterPromotion"), name).status),
            what="the post-delay check judged the gate closed",
        )
        assert stage_phases(management, name).get("staging") != "Succeeded"
        open_gate(members["member-1"], namespace)
        wait_for(
            lambda: stage_phases(management, name).get("staging") == "Succeeded",
            timeout=WAIT,
            what="staging done (the check woken by the member watch: the poll is 10 minutes)",
        )
    finally:
        management.delete(kinds.resource("ClusterPromotion"), name)
        wait_for(
            lambda: (
                not list(
                    management.list(kinds.resource("ClusterProfile"), labels={"fleetwave.io/promotion": name})
                )
            ),
            what="stage profiles removed",
        )


def test_a_placement_counts_a_deployment_available_as_soon_as_the_member_says_so(
    controller: ControllerThread, management: Client, members: dict[str, Client], namespace: str
) -> None:
    """minReadySeconds keeps the Deployment unavailable at the first availability check; the status
    change that makes it available (on the member, seconds later) is what completes the placement."""
    labels = {"app": "watched"}
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "watched", "namespace": namespace, "labels": labels},
        "spec": {
            "replicas": 1,
            "minReadySeconds": 3,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "app", "image": "nginx:1.21"}]},
            },
        },
    }
    placement = {
        "apiVersion": f"{kinds.GROUP}/{kinds.VERSION}",
        "kind": "ResourcePlacement",
        "metadata": {"name": "watched", "namespace": namespace},
        "spec": {
            "resourceSelectors": [
                {"group": "apps", "kind": "Deployment", "name": "watched", "version": "v1"}
            ],
            "policy": {"placementType": "PickFixed", "clusterNames": ["member-1"]},
            "strategy": {"type": "RollingUpdate"},
        },
    }
    manifests.apply(management, [deployment, placement])

    def available() -> dict[str, Any] | None:
        obj = management.get(kinds.resource("ResourcePlacement"), "watched", namespace=namespace)
        conditions = (obj.status or {}).get("conditions") or []
        return next(
            (c for c in conditions if c["type"].endswith("Available") and c["status"] == "True"), None
        )

    try:
        wait_for(
            available,
            timeout=WAIT,
            what="the placement available (woken by the member watch: the poll is 10 minutes)",
        )
    finally:
        management.delete(kinds.resource("ResourcePlacement"), "watched", namespace=namespace)
        wait_for(
            lambda: not list(management.list(kinds.resource("ResourcePlacement"), namespace=namespace)),
            what="placement deleted",
        )

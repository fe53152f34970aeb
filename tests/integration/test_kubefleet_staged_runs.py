"""Seed 004 on the real local fleet: placements, snapshots, staged update runs, approvals, rollback,
the namespaced twins with a Deployment, stop/resume, a member joining mid-run, and a controller
restart mid-run. Members are registered with the seed's labels (member1..3 -> member-1..3)."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lightkube import ApiError, Client, codecs
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import ConfigMap, Namespace
from lightkube.types import PatchType
from promotion_support import ControllerThread, settings, wait_for

from fleetwave import kinds
from fleetwave.local import binaries, fleet
from fleetwave.mgmt import install, registration

MEMBER_NS = "kf-members"
SEED_LABELS = {
    "member-1": {"environment": "canary", "order": "2"},
    "member-2": {"environment": "staging"},
    "member-3": {"environment": "canary", "order": "1"},
}
API = f"{kinds.GROUP}/{kinds.VERSION}"


def _register(management: Client, member: fleet.ClusterInfo) -> None:
    registration.register(
        management,
        name=member.name,
        namespace=MEMBER_NS,
        kubeconfig=Path(member.kubeconfig).read_bytes(),
        labels=SEED_LABELS[member.name],
    )


@pytest.fixture(scope="module")
def controller(
    local_fleet: fleet.FleetState, management: Client, bins: binaries.Binaries
) -> Iterator[ControllerThread]:
    install.install(management)
    for member in local_fleet.members:
        _register(management, member)
    thread = ControllerThread(
        local_fleet.cluster(fleet.MANAGEMENT).kubeconfig, settings(bins.path("helm"), "kf")
    )
    thread.start()
    yield thread
    thread.stop()
    assert thread.error is None, thread.error


def apply(client: Client, doc: dict[str, Any]) -> None:
    client.apply(codecs.from_dict(doc), force=True)


def get(client: Client, kind: str, name: str, namespace: str | None = None) -> Any:
    return client.get(kinds.resource(kind), name, namespace=namespace)


def found(client: Client, kind: str, name: str, namespace: str | None = None) -> Any | None:
    """The object, or None while it does not exist (a probe for wait_for)."""
    try:
        return get(client, kind, name, namespace)
    except ApiError as e:
        if e.status.code == 404:
            return None
        raise


def cond(obj: Any, type_: str) -> dict[str, Any]:
    return next((c for c in (obj.status or {}).get("conditions") or [] if c["type"] == type_), {})


def cm_value(member: Client, namespace: str, name: str = "test-cm") -> str | None:
    try:
        return (member.get(ConfigMap, name, namespace=namespace).data or {}).get("key")
    except ApiError as e:
        if e.status.code == 404:
            return None
        raise


def seed_strategy(name: str, *, wait: str = "2s", namespace: str | None = None) -> dict[str, Any]:
    kind = "StagedUpdateStrategy" if namespace else "ClusterStagedUpdateStrategy"
    return {
        "apiVersion": API,
        "kind": kind,
        "metadata": {"name": name, **({"namespace": namespace} if namespace else {})},
        "spec": {
            "stages": [
                {
                    "name": "staging",
                    "labelSelector": {"matchLabels": {"environment": "staging"}},
                    "afterStageTasks": [{"type": "TimedWait", "waitTime": wait}],
                },
                {
                    "name": "canary",
                    "labelSelector": {"matchLabels": {"environment": "canary"}},
                    "sortingLabelKey": "order",
                    "afterStageTasks": [{"type": "Approval"}],
                },
            ]
        },
    }


def run_doc(
    name: str, placement: str, index: str, strategy: str, namespace: str | None = None
) -> dict[str, Any]:
    kind = "StagedUpdateRun" if namespace else "ClusterStagedUpdateRun"
    return {
        "apiVersion": API,
        "kind": kind,
        "metadata": {"name": name, **({"namespace": namespace} if namespace else {})},
        "spec": {
            "placementName": placement,
            "resourceSnapshotIndex": index,
            "stagedRolloutStrategyName": strategy,
        },
    }


def seed_approve(client: Client, kind: str, name: str, namespace: str | None = None) -> None:
    """The seed's `kubectl patch <kind> NAME --type=merge -p '{...}' --subresource=status`."""
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    condition: dict[str, Any] = {"type": "Approved", "status": "True", "reason": "lgtm", "message": "lgtm"}
    if namespace is None:
        condition |= {"lastTransitionTime": now, "observedGeneration": 1}
    patch = {"status": {"conditions": [condition]}}
    client.patch(kinds.resource(kind).Status, name, patch, namespace=namespace, patch_type=PatchType.MERGE)


def snapshot_labels(client: Client, kind: str, name: str, namespace: str | None = None) -> dict[str, str]:
    obj = found(client, kind, name, namespace)
    return dict(obj.metadata.labels or {}) if obj is not None else {}


@pytest.fixture
def hub_ns(management: Client) -> Iterator[str]:
    """The seed's `kubectl create ns` and `kubectl create cm test-cm --from-literal=key=value1`."""
    name = f"kf-{uuid.uuid4().hex[:6]}"
    management.create(Namespace(metadata=ObjectMeta(name=name)))
    management.create(ConfigMap(metadata=ObjectMeta(name="test-cm", namespace=name), data={"key": "value1"}))
    yield name
    management.delete(Namespace, name)


def crp_doc(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "ClusterResourcePlacement",
        "metadata": {"name": name},
        "spec": {
            "resourceSelectors": [{"group": "", "kind": "Namespace", "name": namespace, "version": "v1"}],
            "policy": {"placementType": "PickAll"},
            "strategy": {"type": "External"},
        },
    }


def set_value(management: Client, namespace: str, value: str) -> None:
    management.patch(ConfigMap, "test-cm", {"data": {"key": value}}, namespace=namespace)


def two_snapshots(management: Client, crp: str, hub_ns: str) -> None:
    """CRP with snapshot 0 (value1), then the edit to value2 cuts snapshot 1 (the seed's first half)."""
    apply(management, crp_doc(crp, hub_ns))
    wait_for(
        lambda: snapshot_labels(management, "ClusterResourceSnapshot", f"{crp}-0-snapshot"), what="snapshot 0"
    )
    set_value(management, hub_ns, "value2")
    wait_for(
        lambda: snapshot_labels(management, "ClusterResourceSnapshot", f"{crp}-1-snapshot"), what="snapshot 1"
    )


def test_seed_004_cluster_scoped_rollout_then_rollback(
    controller: ControllerThread, management: Client, members: dict[str, Client], hub_ns: str
) -> None:
    crp = f"example-placement-{hub_ns}"
    two_snapshots(management, crp, hub_ns)
    assert snapshot_labels(management, "ClusterResourceSnapshot", f"{crp}-1-snapshot") == {
        "kubernetes-fleet.io/is-latest-snapshot": "true",
        "kubernetes-fleet.io/parent-CRP": crp,
        "kubernetes-fleet.io/resource-index": "1",
    }
    wait_for(
        lambda: (
            snapshot_labels(management, "ClusterResourceSnapshot", f"{crp}-0-snapshot").get(
                "kubernetes-fleet.io/is-latest-snapshot"
            )
            == "false"
        ),
        what="snapshot 0 no longer latest",
    )
    assert all(cm_value(m, hub_ns) is None for m in members.values())  # External: nothing moves yet

    apply(management, seed_strategy(f"strategy-{hub_ns}"))
    run = f"example-run-{hub_ns}"
    apply(management, run_doc(run, crp, "1", f"strategy-{hub_ns}"))
    request = wait_for(
        lambda: found(management, "ClusterApprovalRequest", f"{run}-canary"),
        what="the canary approval request",
    )
    assert request.spec == {"parentStageRollout": run, "targetStage": "canary"}
    status = get(management, "ClusterStagedUpdateRun", run).status
    staging, canary = status["stagesStatus"]
    assert [c["clusterName"] for c in staging["clusters"]] == ["member-2"]
    assert cond_of(staging["afterStageTaskStatus"][0], "WaitTimeElapsed")["status"] == "True"
    # sortingLabelKey order: member-3 (order=1) before member-1 (order=2), both done before approval
    assert [c["clusterName"] for c in canary["clusters"]] == ["member-3", "member-1"]
    assert all(cond_of(c, "Succeeded")["status"] == "True" for c in canary["clusters"])
    assert (
        status["deliveries"][f"{MEMBER_NS}/member-3"]["appliedAt"]
        <= status["deliveries"][f"{MEMBER_NS}/member-1"]["appliedAt"]
    )
    assert staging["endTime"] <= canary["startTime"]
    assert all(cm_value(m, hub_ns) == "value2" for m in members.values())
    assert cond(get(management, "ClusterStagedUpdateRun", run), "Succeeded") == {}

    seed_approve(management, "ClusterApprovalRequest", f"{run}-canary")
    wait_for(
        lambda: cond(get(management, "ClusterStagedUpdateRun", run), "Succeeded").get("status") == "True",
        what="run succeeded",
    )
    done = get(management, "ClusterStagedUpdateRun", run)
    assert cond(done, "Succeeded")["reason"] == "UpdateRunSucceeded"
    assert cond(done, "Initialized")["reason"] == "UpdateRunInitializedSuccessfully"
    assert done.status["deletionStageStatus"]["stageName"] == "kubernetes-fleet.io/deleteStage"
    accepted = cond(get(management, "ClusterApprovalRequest", f"{run}-canary"), "ApprovalAccepted")
    assert accepted["status"] == "True"
    wait_for(
        lambda: (
            cond(get(management, "ClusterResourcePlacement", crp), "ClusterResourcePlacementAvailable").get(
                "status"
            )
            == "True"
        ),
        what="placement available",
    )

    rollback = f"example-run-2-{hub_ns}"
    apply(management, run_doc(rollback, crp, "0", f"strategy-{hub_ns}"))
    wait_for(
        lambda: found(management, "ClusterApprovalRequest", f"{rollback}-canary"), what="rollback approval"
    )
    assert all(cm_value(m, hub_ns) == "value1" for m in members.values())
    seed_approve(management, "ClusterApprovalRequest", f"{rollback}-canary")
    wait_for(
        lambda: (
            cond(get(management, "ClusterStagedUpdateRun", rollback), "Succeeded").get("status") == "True"
        ),
        what="rollback succeeded",
    )
    assert get(management, "ClusterStagedUpdateRun", rollback).status["resourceSnapshotIndexUsed"] == "0"


def cond_of(entry: dict[str, Any], type_: str) -> dict[str, Any]:
    return next((c for c in entry.get("conditions") or [] if c["type"] == type_), {})

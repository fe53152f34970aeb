"""Seed 004 on the real local fleet: placements, snapshots, staged update runs, approvals, rollback,
the namespaced twins with a Deployment, stop/resume, a member joining mid-run, and a controller
restart mid-run. Members are registered with the seed's labels (member1..3 -> member-1..3)."""

from __future__ import annotations

import datetime as dt
import http.server
import json
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from lightkube import ApiError, Client, codecs
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import ConfigMap, Namespace
from lightkube.types import PatchType
from promotion_support import ControllerThread, settings, wait_for
from test_metric_checks import push
from typer.testing import CliRunner

from fleetwave import cli
from fleetwave.kube import kinds
from fleetwave.local import binaries, fleet
from fleetwave.local import prometheus as local_prometheus
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


class Controllers:
    """The running controller; a test may kill it and start a fresh one."""

    def __init__(self, kubeconfig: str, helm: str) -> None:
        self.kubeconfig, self.helm = kubeconfig, helm
        self.thread = self._start()

    def _start(self) -> ControllerThread:
        thread = ControllerThread(self.kubeconfig, settings(self.helm, f"kf-{uuid.uuid4().hex[:4]}"))
        thread.start()
        return thread

    def restart(self) -> None:
        self.thread.stop()
        assert self.thread.error is None, self.thread.error
        self.thread = self._start()


@pytest.fixture(scope="module")
def controller(
    local_fleet: fleet.FleetState, management: Client, bins: binaries.Binaries
) -> Iterator[Controllers]:
    install.install(management)
    for member in local_fleet.members:
        _register(management, member)
    running = Controllers(local_fleet.cluster(fleet.MANAGEMENT).kubeconfig, bins.path("helm"))
    yield running
    try:
        # While the controller runs: placements carry a cleanup finalizer it removes (ADR 0063). A
        # placement a test deleted may finish going away between the list and the delete: 404 is fine.
        for kind in ("ClusterResourcePlacement", "ResourcePlacement"):
            for placement in management.list(
                kinds.resource(kind), namespace="*" if kind == "ResourcePlacement" else None
            ):
                _delete_if_present(management, kind, placement.metadata.name, placement.metadata.namespace)
        wait_for(
            lambda: (
                not list(management.list(kinds.resource("ClusterResourcePlacement")))
                and not list(management.list(kinds.resource("ResourcePlacement"), namespace="*"))
            ),
            what="placements deleted",
        )
    finally:
        # Whatever happened above, this controller must not outlive the module, and other modules
        # roll out to "every cluster": a leftover controller or member fails tests unrelated to this one.
        running.thread.stop()
        for mc in management.list(kinds.resource("MemberCluster"), namespace=MEMBER_NS):
            _delete_if_present(management, "MemberCluster", mc.metadata.name, MEMBER_NS)
    assert running.thread.error is None, running.thread.error


def _delete_if_present(client: Client, kind: str, name: str, namespace: str | None = None) -> None:
    try:
        client.delete(kinds.resource(kind), name, namespace=namespace)
    except (ApiError, httpx2.HTTPStatusError) as e:
        code = e.status.code if isinstance(e, ApiError) else e.response.status_code
        if code != 404:
            raise


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


def _status_fields(obj: Any) -> dict[str, Any]:
    """The fields of `obj`'s status the API server records as the controller's (its managedFields):
    the delivery ledger is one value there (`x-kubernetes-map-type: atomic`), not one entry per
    cluster key rewritten on every status write."""
    for entry in obj.metadata.managedFields or []:
        fields = entry.fieldsV1 if hasattr(entry, "fieldsV1") else entry.get("fieldsV1")
        if (entry.subresource if hasattr(entry, "subresource") else entry.get("subresource")) == "status":
            return dict((fields or {}).get("f:status") or {})
    raise AssertionError("no status fields in managedFields")


def test_seed_004_cluster_scoped_rollout_then_rollback(
    controller: Controllers, management: Client, members: dict[str, Client], hub_ns: str
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
    assert _status_fields(get(management, "ClusterStagedUpdateRun", run))["f:deliveries"] == {}
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
    # ADR 0112: upstream's name for the same approval shows the verdict given under the seed's name.
    canary_task = done.status["stagesStatus"][1]["afterStageTaskStatus"][0]
    assert canary_task["approvalRequestName"] == f"{run}-after-canary"
    assert list(done.status["approvals"]) == [f"{run}-after-canary"]  # one approval, counted once
    upstream = get(management, "ClusterApprovalRequest", f"{run}-after-canary")
    assert cond(upstream, "Approved")["reason"] == "ApprovedUnderAnotherName"
    assert cond(upstream, "ApprovalAccepted")["status"] == "True"
    seed_named = get(management, "ClusterApprovalRequest", f"{run}-canary")
    assert seed_named.metadata.annotations == {"fleetwave.io/same-approval-as": f"{run}-after-canary"}
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
    # This time upstream's name is approved (what `kubectl fleet approve` scripts patch).
    seed_approve(management, "ClusterApprovalRequest", f"{rollback}-after-canary")
    wait_for(
        lambda: (
            cond(get(management, "ClusterStagedUpdateRun", rollback), "Succeeded").get("status") == "True"
        ),
        what="rollback succeeded",
    )
    assert get(management, "ClusterStagedUpdateRun", rollback).status["resourceSnapshotIndexUsed"] == "0"
    seed_named = get(management, "ClusterApprovalRequest", f"{rollback}-canary")
    assert cond(seed_named, "Approved")["message"].startswith(f"approved as {rollback}-after-canary")
    assert cond(seed_named, "ApprovalAccepted")["status"] == "True"


def cond_of(entry: dict[str, Any], type_: str) -> dict[str, Any]:
    return next((c for c in entry.get("conditions") or [] if c["type"] == type_), {})


def succeeded(client: Client, kind: str, name: str, namespace: str | None = None) -> bool:
    return cond(get(client, kind, name, namespace), "Succeeded").get("status") == "True"


def web_app(namespace: str, image: str, min_ready: int = 0) -> list[dict[str, Any]]:
    labels = {"app": "web-app"}
    return [
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web-app", "namespace": namespace, "labels": labels},
            "spec": {
                "replicas": 1,
                "minReadySeconds": min_ready,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "containers": [{"name": "web-app", "image": image, "ports": [{"containerPort": 80}]}]
                    },
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "web-app", "namespace": namespace},
            "spec": {"selector": labels, "ports": [{"port": 80, "targetPort": 80}]},
        },
    ]


def image_on(member: Client, namespace: str) -> str | None:
    try:
        dep = member.get(Deployment, "web-app", namespace=namespace)
    except ApiError as e:
        if e.status.code == 404:
            return None
        raise
    assert dep.spec is not None
    return dep.spec.template.spec.containers[0].image  # type: ignore[union-attr]


def available_on(member: Client, namespace: str) -> bool:
    dep = member.get(Deployment, "web-app", namespace=namespace)
    return bool(dep.status and dep.status.availableReplicas == 1)


def rp_doc(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "ResourcePlacement",
        "metadata": {"name": "web-app-placement", "namespace": namespace},
        "spec": {
            "resourceSelectors": [
                {"group": "apps", "kind": "Deployment", "name": "web-app", "version": "v1"},
                {"group": "", "kind": "Service", "name": "web-app", "version": "v1"},
            ],
            "policy": {"placementType": "PickAll"},
            "strategy": {"type": "External"},
        },
    }


def namespaced_snapshots(management: Client, namespace: str, min_ready: int = 0) -> None:
    for doc in web_app(namespace, "nginx:1.20", min_ready):
        apply(management, doc)
    apply(management, rp_doc(namespace))
    wait_for(
        lambda: found(management, "ResourceSnapshot", "web-app-placement-0-snapshot", namespace), what="rs 0"
    )
    apply(management, web_app(namespace, "nginx:1.21", min_ready)[0])  # kubectl set image ... nginx:1.21
    wait_for(
        lambda: found(management, "ResourceSnapshot", "web-app-placement-1-snapshot", namespace), what="rs 1"
    )


def test_namespaced_run_rolls_a_deployment_that_becomes_available_and_rolls_back(
    controller: Controllers,
    management: Client,
    members: dict[str, Client],
    namespace: str,
    local_fleet: fleet.FleetState,
) -> None:
    namespaced_snapshots(management, namespace)
    labels = snapshot_labels(management, "ResourceSnapshot", "web-app-placement-1-snapshot", namespace)
    assert labels["kubernetes-fleet.io/is-latest-snapshot"] == "true"
    strategy = seed_strategy("app-rollout-strategy", namespace=namespace)
    for stage, name in zip(strategy["spec"]["stages"], ("devclusters", "prodclusters"), strict=True):
        stage["name"] = name
    apply(management, strategy)
    run = "web-app-rollout-v1-21"
    apply(management, run_doc(run, "web-app-placement", "1", "app-rollout-strategy", namespace))
    wait_for(
        lambda: found(management, "ApprovalRequest", f"{run}-prodclusters", namespace),
        what="approval request",
    )
    # Clusters only count as succeeded once their Deployment is available.
    assert all(
        image_on(m, namespace) == "nginx:1.21" and available_on(m, namespace) for m in members.values()
    )
    seed_approve(management, "ApprovalRequest", f"{run}-prodclusters", namespace)  # no observedGeneration
    wait_for(
        lambda: succeeded(management, "StagedUpdateRun", run, namespace), what="namespaced run succeeded"
    )

    rollback = "web-app-rollback-v1-20"
    apply(management, run_doc(rollback, "web-app-placement", "0", "app-rollout-strategy", namespace))
    wait_for(
        lambda: found(management, "ApprovalRequest", f"{rollback}-prodclusters", namespace), what="approval"
    )
    kubeconfig = local_fleet.cluster(fleet.MANAGEMENT).kubeconfig
    args = [
        "approve",
        "run",
        rollback,
        "--stage",
        "prodclusters",
        "-n",
        namespace,
        "--kubeconfig",
        kubeconfig,
    ]
    result = CliRunner().invoke(cli.app, args)
    assert result.exit_code == 0, result.output
    wait_for(lambda: succeeded(management, "StagedUpdateRun", rollback, namespace), what="rollback succeeded")
    assert all(image_on(m, namespace) == "nginx:1.20" for m in members.values())
    accepted = cond(
        get(management, "ApprovalRequest", f"{rollback}-prodclusters", namespace), "ApprovalAccepted"
    )
    assert accepted["reason"] == "ApprovalRequestApprovalAccepted"


def one_stage(name: str, namespace: str, *, approval: bool = False) -> dict[str, Any]:
    stage: dict[str, Any] = {"name": "all", "labelSelector": {}, "maxConcurrency": 1}
    if approval:
        stage["afterStageTasks"] = [{"type": "Approval"}]
    return {
        "apiVersion": API,
        "kind": "StagedUpdateStrategy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"stages": [stage]},
    }


def started(client: Client, run: str, namespace: str) -> list[str]:
    """Clusters whose update started (stagesStatus lists the whole plan; started ones have conditions)."""
    stages = (get(client, "StagedUpdateRun", run, namespace).status or {}).get("stagesStatus") or []
    return [c["clusterName"] for s in stages for c in s.get("clusters") or [] if cond_of(c, "Started")]


def test_stop_mid_stage_lets_clusters_in_flight_finish_and_run_resumes(
    controller: Controllers, management: Client, members: dict[str, Client], namespace: str
) -> None:
    # minReadySeconds keeps each cluster in flight for a while, so the Stop lands mid-stage.
    namespaced_snapshots(management, namespace, min_ready=6)
    apply(management, one_stage("one-by-one", namespace))
    run = "stop-and-go"
    apply(management, run_doc(run, "web-app-placement", "1", "one-by-one", namespace))
    wait_for(lambda: started(management, run, namespace), what="the first cluster started")
    management.patch(
        kinds.resource("StagedUpdateRun"),
        run,
        {"spec": {"state": "Stop"}},
        namespace=namespace,
        patch_type=PatchType.MERGE,
    )
    stopped = wait_for(
        lambda: (
            cond(get(management, "StagedUpdateRun", run, namespace), "Progressing").get("reason")
            == "UpdateRunStopped"
        ),
        what="run stopped",
    )
    assert stopped
    at_stop = started(management, run, namespace)
    assert 1 <= len(at_stop) < 3
    untouched = [name for name in members if name not in at_stop]
    assert all(image_on(members[name], namespace) is None for name in untouched)  # nothing new started
    assert all(available_on(members[name], namespace) for name in at_stop)  # in-flight ones finished
    management.patch(
        kinds.resource("StagedUpdateRun"),
        run,
        {"spec": {"state": "Run"}},
        namespace=namespace,
        patch_type=PatchType.MERGE,
    )
    wait_for(lambda: succeeded(management, "StagedUpdateRun", run, namespace), what="resumed run succeeded")
    assert all(image_on(m, namespace) == "nginx:1.21" for m in members.values())


def test_a_member_joining_mid_run_is_reported_and_updated_without_aborting_the_run(
    controller: Controllers,
    management: Client,
    members: dict[str, Client],
    namespace: str,
    local_fleet: fleet.FleetState,
) -> None:
    management.delete(kinds.resource("MemberCluster"), "member-3", namespace=MEMBER_NS)
    try:
        namespaced_snapshots(management, namespace)
        apply(management, one_stage("gated", namespace, approval=True))
        run = "with-a-joiner"
        apply(management, run_doc(run, "web-app-placement", "1", "gated", namespace))
        wait_for(
            lambda: found(management, "ApprovalRequest", f"{run}-all", namespace), what="approval request"
        )
        assert sorted(started(management, run, namespace)) == ["member-1", "member-2"]
        assert image_on(members["member-3"], namespace) is None
    finally:
        _register(management, local_fleet.cluster("member-3"))
    wait_for(
        lambda: (
            "member-3"
            in str(get(management, "StagedUpdateRun", run, namespace).status["rollout"]["lateJoiners"])
        ),
        what="the joiner reported",
    )
    seed_approve(management, "ApprovalRequest", f"{run}-all", namespace)
    wait_for(lambda: succeeded(management, "StagedUpdateRun", run, namespace), what="run succeeded")
    wait_for(lambda: image_on(members["member-3"], namespace) == "nginx:1.21", what="the joiner updated")


def test_a_controller_killed_mid_run_resumes_where_it_was(
    controller: Controllers, management: Client, members: dict[str, Client], hub_ns: str
) -> None:
    crp = f"restart-{hub_ns}"
    two_snapshots(management, crp, hub_ns)
    apply(management, seed_strategy(f"restart-{hub_ns}"))
    run = f"restart-run-{hub_ns}"
    apply(management, run_doc(run, crp, "1", f"restart-{hub_ns}"))
    wait_for(lambda: found(management, "ClusterApprovalRequest", f"{run}-canary"), what="approval request")
    before = get(management, "ClusterStagedUpdateRun", run).status
    controller.restart()
    seed_approve(management, "ClusterApprovalRequest", f"{run}-canary")
    wait_for(lambda: succeeded(management, "ClusterStagedUpdateRun", run), what="run succeeded after restart")
    after = get(management, "ClusterStagedUpdateRun", run).status
    # Resumed, not restarted: same frozen plan, and no cluster was delivered to again.
    assert after["rollout"]["startedAt"] == before["rollout"]["startedAt"]
    assert {c: e["appliedAt"] for c, e in after["deliveries"].items()} == {
        c: e["appliedAt"] for c, e in before["deliveries"].items()
    }
    assert all(cm_value(m, hub_ns) == "value2" for m in members.values())


def test_a_pickfixed_rolling_update_placement_delivers_only_to_the_clusters_it_names(
    controller: Controllers, management: Client, members: dict[str, Client], hub_ns: str
) -> None:
    crp = "fixed-rolling"
    doc = crp_doc(crp, hub_ns)
    doc["spec"]["policy"] = {"placementType": "PickFixed", "clusterNames": ["member-1", "member-3"]}
    doc["spec"]["strategy"] = {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}}
    apply(management, doc)
    try:
        wait_for(
            lambda: [cm_value(members[m], hub_ns) for m in ("member-1", "member-3")] == ["value1", "value1"],
            what="the named clusters updated",
        )
        assert cm_value(members["member-2"], hub_ns) is None  # not named: never delivered to
    finally:
        management.delete(kinds.resource("ClusterResourcePlacement"), crp)


def test_pickn_ranks_by_preferred_affinity_and_property_sorters_on_probed_properties(
    controller: Controllers, management: Client, members: dict[str, Client], hub_ns: str
) -> None:
    """KubeFleet's property-based scheduling, as its how-to writes it: a required property selector on
    the node count the controller probes (status.properties), preferred terms by label and by a
    property sorter (`order`, a numeric label). Scores: member-3 60, member-1 40, member-2 0; by
    name PickN would have taken member-1 and member-2."""
    crp = "pick-by-score"
    doc = crp_doc(crp, hub_ns)
    doc["spec"]["policy"] = {
        "placementType": "PickN",
        "numberOfClusters": 2,
        "affinity": {
            "clusterAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "clusterSelectorTerms": [
                        {
                            "propertySelector": {
                                "matchExpressions": [
                                    {
                                        "name": "kubernetes-fleet.io/node-count",
                                        "operator": "Ge",
                                        "values": ["1"],
                                    }
                                ]
                            }
                        }
                    ]
                },
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 40,
                        "preference": {"labelSelector": {"matchLabels": {"environment": "canary"}}},
                    },
                    {
                        "weight": 20,
                        "preference": {"propertySorter": {"name": "order", "sortOrder": "Ascending"}},
                    },
                ],
            }
        },
    }
    doc["spec"]["strategy"] = {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 2}}
    apply(management, doc)
    try:
        member = management.get(kinds.resource("MemberCluster"), "member-1", namespace=MEMBER_NS)
        wait_for(
            lambda: (
                (
                    management.get(kinds.resource("MemberCluster"), "member-1", namespace=MEMBER_NS).status
                    or {}
                )
                .get("properties", {})
                .get("kubernetes-fleet.io/node-count", {})
                .get("value")
                == "1"
            ),
            what=f"the probed node count of {member.metadata.name} in its status.properties",
        )
        wait_for(
            lambda: [cm_value(members[m], hub_ns) for m in ("member-1", "member-3")] == ["value1", "value1"],
            what="the two best-scored clusters updated",
        )
        assert cm_value(members["member-2"], hub_ns) is None  # scored 0: not picked
    finally:
        management.delete(kinds.resource("ClusterResourcePlacement"), crp)


def test_a_pickn_run_in_initialize_state_freezes_its_plan_and_delivers_only_once_set_to_run(
    controller: Controllers, management: Client, members: dict[str, Client], hub_ns: str
) -> None:
    crp, strategy, run = "pick-two", "all-at-once", "pick-two-run"
    doc = crp_doc(crp, hub_ns)
    doc["spec"]["policy"] = {"placementType": "PickN", "numberOfClusters": 2}
    apply(management, doc)
    wait_for(
        lambda: snapshot_labels(management, "ClusterResourceSnapshot", f"{crp}-0-snapshot"), what="snapshot 0"
    )
    apply(
        management,
        {
            "apiVersion": API,
            "kind": "ClusterStagedUpdateStrategy",
            "metadata": {"name": strategy},
            "spec": {"stages": [{"name": "all", "labelSelector": {}, "maxConcurrency": 3}]},
        },
    )
    body = run_doc(run, crp, "0", strategy)
    body["spec"]["state"] = "Initialize"
    apply(management, body)
    try:
        wait_for(
            lambda: (
                cond(get(management, "ClusterStagedUpdateRun", run), "Progressing").get("reason")
                == "UpdateRunNotStarted"
            ),
            what="initialized, not started",
        )
        initialized = get(management, "ClusterStagedUpdateRun", run)
        assert cond(initialized, "Initialized")["status"] == "True"
        # The frozen plan, listed from initialization on as upstream does: no conditions until started.
        stages = initialized.status["rollout"]["stages"]
        planned = [c.rpartition("/")[2] for stage in stages for c in stage["clusters"]]
        assert len(planned) == 2  # PickN: two of the three members, frozen in the plan
        listed = [c for stage in initialized.status["stagesStatus"] for c in stage["clusters"]]
        assert [c["clusterName"] for c in listed] == planned
        assert all("conditions" not in c for c in listed)
        assert initialized.status["policyObservedClusterCount"] == 2
        assert all(cm_value(c, hub_ns) is None for c in members.values())  # nothing delivered yet

        management.patch(
            kinds.resource("ClusterStagedUpdateRun"),
            run,
            {"spec": {"state": "Run"}},
            patch_type=PatchType.MERGE,
        )
        wait_for(lambda: succeeded(management, "ClusterStagedUpdateRun", run), what="run succeeded")
        delivered = sorted(m for m, c in members.items() if cm_value(c, hub_ns) == "value1")
        assert delivered == sorted(planned)
    finally:
        delete_all(
            management,
            ("ClusterStagedUpdateRun", run),
            ("ClusterStagedUpdateStrategy", strategy),
            ("ClusterResourcePlacement", crp),
        )


def _delivery(management: Client, crp: str) -> dict[str, Any]:
    status = get(management, "ClusterResourcePlacement", crp).status or {}
    return dict((status.get("deliveries") or {}).get(f"{MEMBER_NS}/member-1") or {})


def _strategy(management: Client, crp: str, apply_strategy: dict[str, Any]) -> None:
    management.patch(
        kinds.resource("ClusterResourcePlacement"),
        crp,
        {"spec": {"strategy": {"applyStrategy": apply_strategy}}},
        patch_type=PatchType.MERGE,
    )


def _ours(member: Client, kind: type[Any], name: str, namespace: str | None = None) -> bool:
    labels = member.get(kind, name, namespace=namespace).metadata.labels or {}
    return "fleetwave.io/inventory" in labels


def test_apply_strategies_report_diffs_take_over_only_as_told_and_leave_drifted_objects_alone(
    controller: Controllers, management: Client, members: dict[str, Client], hub_ns: str
) -> None:
    crp, member = "apply-rules", members["member-1"]
    # member-1 already has the namespace and a test-cm of its own (nobody placed them).
    member.create(Namespace(metadata=ObjectMeta(name=hub_ns)))
    member.create(ConfigMap(metadata=ObjectMeta(name="test-cm", namespace=hub_ns), data={"key": "local"}))
    doc = crp_doc(crp, hub_ns)
    doc["spec"]["policy"] = {"placementType": "PickFixed", "clusterNames": ["member-1"]}
    doc["spec"]["strategy"] = {"type": "RollingUpdate", "applyStrategy": {"type": "ReportDiff"}}
    apply(management, doc)
    try:
        # ReportDiff: nothing applied; the member's differences in upstream's shape.
        placed = wait_for(
            lambda: (
                get(management, "ClusterResourcePlacement", crp)
                if cond(
                    get(management, "ClusterResourcePlacement", crp), "ClusterResourcePlacementDiffReported"
                ).get("status")
                == "True"
                else None
            ),
            what="differences reported",
        )
        [entry] = placed.status["placementStatuses"]
        assert entry["clusterName"] == "member-1"
        assert entry["diffReported"] is True
        diffed = {d["kind"]: d for d in entry["diffedPlacements"]}
        assert set(diffed) == {"ConfigMap"}  # the namespace matches: no difference to report
        assert {"path": "/data/key", "valueInMember": "local", "valueInHub": "value1"} in diffed["ConfigMap"][
            "observedDiffs"
        ]
        assert cm_value(member, hub_ns) == "local"
        assert not _ours(member, ConfigMap, "test-cm", hub_ns)

        # whenToTakeOver: Never — what exists and was not placed stays as it is, and says so.
        _strategy(management, crp, {"type": "ClientSideApply", "whenToTakeOver": "Never"})
        error = wait_for(lambda: _delivery(management, crp).get("error"), what="take-over refused")
        assert "whenToTakeOver: Never" in error
        assert cm_value(member, hub_ns) == "local"

        # IfNoDiff: the namespace (no difference) is taken over, test-cm (differs at /data/key) is not
        # until the member's copy matches the hub's.
        _strategy(management, crp, {"type": "ClientSideApply", "whenToTakeOver": "IfNoDiff"})
        error = wait_for(
            lambda: e if "IfNoDiff" in (e := str(_delivery(management, crp).get("error") or "")) else None,
            what="IfNoDiff refuses the differing ConfigMap",
        )
        assert "/data/key" in error
        wait_for(lambda: _ours(member, Namespace, hub_ns), what="the namespace taken over")
        assert cm_value(member, hub_ns) == "local"
        member.patch(ConfigMap, "test-cm", {"data": {"key": "value1"}}, namespace=hub_ns)
        wait_for(
            lambda: _ours(member, ConfigMap, "test-cm", hub_ns), what="test-cm taken over once it matches"
        )

        # whenToApply: IfNotDrifted — a hand edit on the member is not overwritten by the next snapshot.
        # The delivery under the previous rules is done too: wait for the one under the new rules
        # (its hash folds them in), or the hand edit below races a last apply under IfNoDiff.
        before = _delivery(management, crp).get("hash")
        _strategy(management, crp, {"type": "ClientSideApply", "whenToApply": "IfNotDrifted"})
        wait_for(
            lambda: (d := _delivery(management, crp)).get("doneAt") and d.get("hash") != before,
            what="delivered under IfNotDrifted",
        )
        edited = member.get(ConfigMap, "test-cm", namespace=hub_ns)
        edited.data = {"key": "edited"}
        member.replace(edited, field_manager="kubectl-edit")
        set_value(management, hub_ns, "value3")
        error = wait_for(
            lambda: e if "drifted" in (e := str(_delivery(management, crp).get("error") or "")) else None,
            what="the drifted ConfigMap reported",
        )
        assert "test-cm" in error
        assert cm_value(member, hub_ns) == "edited"
    finally:
        management.delete(kinds.resource("ClusterResourcePlacement"), crp)
        member.delete(Namespace, hub_ns)


def _gone(client: Client, kind: str, name: str) -> bool:
    return found(client, kind, name) is None


@pytest.mark.parametrize("policy", ["Delete", "Abandon"])
def test_deleting_a_placement_withdraws_its_content_unless_it_abandons_it(
    controller: Controllers, management: Client, members: dict[str, Client], hub_ns: str, policy: str
) -> None:
    crp, member = f"delete-{policy.lower()}", members["member-1"]
    doc = crp_doc(crp, hub_ns)
    doc["spec"]["policy"] = {"placementType": "PickFixed", "clusterNames": ["member-1"]}
    doc["spec"]["strategy"] = {"type": "RollingUpdate", "deleteStrategy": {"propagationPolicy": policy}}
    apply(management, doc)
    try:
        wait_for(lambda: cm_value(member, hub_ns) == "value1", what="delivered")
        placed = get(management, "ClusterResourcePlacement", crp)
        assert "fleetwave.io/placement-cleanup" in (placed.metadata.finalizers or [])
        management.delete(kinds.resource("ClusterResourcePlacement"), crp)
        wait_for(lambda: _gone(management, "ClusterResourcePlacement", crp), what="placement deleted")
        if policy == "Delete":
            wait_for(lambda: cm_value(member, hub_ns) is None, what="content withdrawn")
        else:
            assert cm_value(member, hub_ns) == "value1"  # left in place, still fleetwave-labelled
    finally:
        if found(management, "ClusterResourcePlacement", crp) is not None:
            management.delete(kinds.resource("ClusterResourcePlacement"), crp)
        if policy == "Abandon":
            member.delete(Namespace, hub_ns)


def _all_at_once(name: str) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "ClusterStagedUpdateStrategy",
        "metadata": {"name": name},
        "spec": {"stages": [{"name": "all", "labelSelector": {}, "maxConcurrency": 3}]},
    }


def test_deleting_a_run_then_its_placement_still_withdraws_the_content_from_every_picked_cluster(
    controller: Controllers, management: Client, members: dict[str, Client], hub_ns: str
) -> None:
    """The run's record is the ledger of an External placement; deleting the run first must not
    leave its content behind when the placement goes: upstream withdraws from every bound cluster,
    fleetwave from every cluster the placement picks as well as those its records name."""
    crp, strategy = "run-first", "run-first-all"
    apply(management, crp_doc(crp, hub_ns))
    apply(management, _all_at_once(strategy))
    try:
        wait_for(
            lambda: snapshot_labels(management, "ClusterResourceSnapshot", f"{crp}-0-snapshot"),
            what="snapshot",
        )
        apply(management, run_doc("run-first-1", crp, "0", strategy))
        wait_for(lambda: succeeded(management, "ClusterStagedUpdateRun", "run-first-1"), what="the run")
        assert {cm_value(m, hub_ns) for m in members.values()} == {"value1"}
        management.delete(kinds.resource("ClusterStagedUpdateRun"), "run-first-1")
        wait_for(lambda: _gone(management, "ClusterStagedUpdateRun", "run-first-1"), what="run deleted")
        management.delete(kinds.resource("ClusterResourcePlacement"), crp)
        wait_for(lambda: _gone(management, "ClusterResourcePlacement", crp), what="placement deleted")
        assert {name: cm_value(m, hub_ns) for name, m in members.items()} == dict.fromkeys(members)
    finally:
        delete_all(
            management,
            ("ClusterStagedUpdateRun", "run-first-1"),
            ("ClusterStagedUpdateStrategy", strategy),
            ("ClusterResourcePlacement", crp),
        )


def test_a_cluster_that_left_the_placement_loses_its_content_in_the_deletion_stage(
    controller: Controllers, management: Client, members: dict[str, Client], hub_ns: str
) -> None:
    crp, strategy = "shrinking", "shrinking-all"
    doc = crp_doc(crp, hub_ns)
    doc["spec"]["policy"] = {"placementType": "PickFixed", "clusterNames": ["member-1", "member-2"]}
    apply(management, doc)
    apply(management, _all_at_once(strategy))
    try:
        wait_for(
            lambda: snapshot_labels(management, "ClusterResourceSnapshot", f"{crp}-0-snapshot"),
            what="snapshot",
        )
        apply(management, run_doc("shrinking-run-1", crp, "0", strategy))
        wait_for(lambda: succeeded(management, "ClusterStagedUpdateRun", "shrinking-run-1"), what="run 1")
        assert [cm_value(members[m], hub_ns) for m in ("member-1", "member-2")] == ["value1", "value1"]

        doc["spec"]["policy"]["clusterNames"] = ["member-1"]  # member-2 leaves the placement
        apply(management, doc)
        placement = get(management, "ClusterResourcePlacement", crp)
        generation = placement.metadata.generation
        wait_for(
            lambda: (
                cond(
                    get(management, "ClusterResourcePlacement", crp), "ClusterResourcePlacementScheduled"
                ).get("observedGeneration")
                == generation
            ),
            what="the placement sees its new cluster list",
        )
        # Strategy External: a PickFixed change is carried out by the next run, not by the placement.
        assert cm_value(members["member-2"], hub_ns) == "value1"
        apply(management, run_doc("shrinking-run-2", crp, "0", strategy))
        wait_for(lambda: succeeded(management, "ClusterStagedUpdateRun", "shrinking-run-2"), what="run 2")
        run = get(management, "ClusterStagedUpdateRun", "shrinking-run-2")
        deletion = run.status["deletionStageStatus"]
        assert [c["clusterName"] for c in deletion["clusters"]] == ["member-2"]
        assert cond_of(deletion["clusters"][0], "Succeeded")["status"] == "True"
        assert cm_value(members["member-2"], hub_ns) is None  # withdrawn
        assert cm_value(members["member-1"], hub_ns) == "value1"  # kept
    finally:
        delete_all(
            management,
            ("ClusterStagedUpdateRun", "shrinking-run-1"),
            ("ClusterStagedUpdateRun", "shrinking-run-2"),
            ("ClusterStagedUpdateStrategy", strategy),
            ("ClusterResourcePlacement", crp),
        )


def test_a_cluster_that_never_becomes_available_makes_the_run_report_stuck(
    controller: Controllers, management: Client, members: dict[str, Client], hub_ns: str
) -> None:
    crp, strategy, run = "never-ready", "never-ready-all", "never-ready-run"
    # minReadySeconds of ~10 minutes (it must stay below progressDeadlineSeconds): the Deployment runs
    # on the member but is not available for the whole test.
    for obj in web_app(hub_ns, "registry.invalid/web:1", min_ready=590):
        management.apply(codecs.from_dict(obj), force=True)
    doc = crp_doc(crp, hub_ns)
    doc["spec"]["policy"] = {"placementType": "PickFixed", "clusterNames": ["member-1"]}
    apply(management, doc)
    apply(management, _all_at_once(strategy))
    try:
        wait_for(
            lambda: snapshot_labels(management, "ClusterResourceSnapshot", f"{crp}-0-snapshot"),
            what="snapshot",
        )
        body = run_doc(run, crp, "0", strategy)
        body["metadata"]["annotations"] = {"fleetwave.io/stuck-threshold": "5s"}
        apply(management, body)
        stuck = wait_for(
            lambda: (
                c
                if (c := cond(get(management, "ClusterStagedUpdateRun", run), "Progressing")).get("reason")
                == "UpdateRunStuck"
                else None
            ),
            what="the run reported stuck",
        )
        assert stuck["status"] == "False"
        assert "member-1" in stuck["message"]
        assert image_on(members["member-1"], hub_ns) == "registry.invalid/web:1"  # delivered, never available
        assert not succeeded(management, "ClusterStagedUpdateRun", run)
    finally:
        delete_all(
            management,
            ("ClusterStagedUpdateRun", run),
            ("ClusterStagedUpdateStrategy", strategy),
            ("ClusterResourcePlacement", crp),
        )


def delete_all(management: Client, *objects: tuple[str, str]) -> None:
    """Delete (kind, name) cluster-scoped objects a test made, in the order given."""
    for kind, name in objects:
        try:
            management.delete(kinds.resource(kind), name)
        except ApiError as e:
            if e.status.code != 404:  # a failed test may not have made it
                raise


def test_a_strategys_failure_budget_lets_a_run_go_on_without_a_cluster_that_keeps_failing(
    controller: Controllers, management: Client, members: dict[str, Client], hub_ns: str
) -> None:
    """failureBudget on a staged update strategy (issue 13): member-1 already holds the namespace
    and test-cm and the placement may not take them over, so its delivery keeps failing; within
    `maxFailedPerStage: 1` the run sets it aside after the grace period, finishes with the others and
    says which cluster failed and why."""
    crp, strategy, run = "budgeted", "budgeted-all", "budgeted-run"
    member = members["member-1"]
    member.create(Namespace(metadata=ObjectMeta(name=hub_ns)))
    member.create(ConfigMap(metadata=ObjectMeta(name="test-cm", namespace=hub_ns), data={"key": "local"}))
    doc = crp_doc(crp, hub_ns)
    doc["spec"]["strategy"]["applyStrategy"] = {"type": "ClientSideApply", "whenToTakeOver": "Never"}
    apply(management, doc)
    budgeted = _all_at_once(strategy)
    budgeted["spec"]["failureBudget"] = {"maxFailedPerStage": 1, "gracePeriod": "2s"}
    apply(management, budgeted)
    try:
        wait_for(
            lambda: snapshot_labels(management, "ClusterResourceSnapshot", f"{crp}-0-snapshot"),
            what="snapshot",
        )
        apply(management, run_doc(run, crp, "0", strategy))
        wait_for(lambda: succeeded(management, "ClusterStagedUpdateRun", run), what="the run succeeded")
        assert cm_value(members["member-2"], hub_ns) == "value1"
        assert cm_value(members["member-3"], hub_ns) == "value1"
        assert cm_value(member, hub_ns) == "local"  # never taken over
        [stage] = get(management, "ClusterStagedUpdateRun", run).status["stagesStatus"]
        clusters = {c["clusterName"]: c for c in stage["clusters"]}
        failed = cond_of(clusters["member-1"], "Succeeded")
        assert (failed["status"], failed["reason"]) == ("False", "ClusterUpdatingFailed")
        assert "set aside: within the failure budget" in failed["message"]
        assert "whenToTakeOver: Never" in failed["message"]
        for name in ("member-2", "member-3"):
            assert cond_of(clusters[name], "Succeeded")["status"] == "True"
    finally:
        delete_all(
            management,
            ("ClusterStagedUpdateRun", run),
            ("ClusterStagedUpdateStrategy", strategy),
            ("ClusterResourcePlacement", crp),
        )
        wait_for(lambda: found(management, "ClusterResourcePlacement", crp) is None, what="placement gone")
        member.delete(Namespace, hub_ns)


def _rollback_strategy(name: str) -> dict[str, Any]:
    """staging (member-2), then canary one at a time (member-3, then member-1); a run that fails
    rolls back (a zero failure budget with a 2 s grace)."""
    return {
        "apiVersion": API,
        "kind": "ClusterStagedUpdateStrategy",
        "metadata": {"name": name},
        "spec": {
            "stages": [
                {"name": "staging", "labelSelector": {"matchLabels": {"environment": "staging"}}},
                {
                    "name": "canary",
                    "labelSelector": {"matchLabels": {"environment": "canary"}},
                    "sortingLabelKey": "order",
                    "maxConcurrency": 1,
                },
            ],
            "failureBudget": {"gracePeriod": "2s"},
            "onFailure": "Rollback",
        },
    }


def _values(members: dict[str, Client], namespace: str) -> dict[str, str | None]:
    return {name: cm_value(member, namespace) for name, member in sorted(members.items())}


def _fleetwave(management_kubeconfig: str, *args: str) -> str:
    result = CliRunner().invoke(cli.app, [*args, "--kubeconfig", management_kubeconfig])
    assert result.exit_code == 0, result.output
    return result.output


def test_a_run_over_its_failure_budget_rolls_back_every_cluster_it_updated_last_stage_first(
    controller: Controllers,
    management: Client,
    members: dict[str, Client],
    hub_ns: str,
    local_fleet: fleet.FleetState,
) -> None:
    """onFailure: Rollback on a strategy (issue 13, ADR 0078). Run 1 puts value1 everywhere. Someone
    co-owns test-cm on member-1 (same value, another field manager), and the placement applies only
    IfNotDrifted: run 2 (value2) reaches staging and member-3, then member-1 refuses it. Past the
    grace the run rolls back: canary first, then staging, every cluster back on value1, and the run
    ends UpdateRunRolledBack naming snapshot 0. `fleetwave history run` shows both runs."""
    crp, strategy = "rolled", "rolled-strategy"
    doc = crp_doc(crp, hub_ns)
    doc["spec"]["strategy"]["applyStrategy"] = {"whenToApply": "IfNotDrifted"}
    apply(management, doc)
    apply(management, _rollback_strategy(strategy))
    kubeconfig = local_fleet.cluster(fleet.MANAGEMENT).kubeconfig
    try:
        wait_for(
            lambda: snapshot_labels(management, "ClusterResourceSnapshot", f"{crp}-0-snapshot"),
            what="snapshot 0",
        )
        apply(management, run_doc("rolled-1", crp, "0", strategy))
        wait_for(lambda: succeeded(management, "ClusterStagedUpdateRun", "rolled-1"), what="run 1 succeeded")
        assert set(_values(members, hub_ns).values()) == {"value1"}
        members["member-1"].apply(
            ConfigMap(metadata=ObjectMeta(name="test-cm", namespace=hub_ns), data={"key": "value1"}),
            field_manager="someone-else",
            force=True,
        )
        set_value(management, hub_ns, "value2")
        wait_for(
            lambda: snapshot_labels(management, "ClusterResourceSnapshot", f"{crp}-1-snapshot"),
            what="snapshot 1",
        )
        apply(management, run_doc("rolled-2", crp, "1", strategy))

        def ended() -> dict[str, Any] | None:
            done = cond(get(management, "ClusterStagedUpdateRun", "rolled-2"), "Succeeded")
            return done or None

        def explain() -> str:
            status = get(management, "ClusterStagedUpdateRun", "rolled-2").status or {}
            shown = {k: status.get(k) for k in ("conditions", "deliveries")}
            return json.dumps(shown | {"phase": status["rollout"]["phase"]}, indent=1)

        done = wait_for(ended, what="run 2 ended", timeout=90, explain=explain)
        assert (done["status"], done["reason"]) == ("False", "UpdateRunRolledBack"), done
        assert "rolled back to resource snapshot 0" in done["message"]
        assert "failure budget exceeded" in done["message"]
        assert "member-1" in done["message"]
        assert _values(members, hub_ns) == {"member-1": "value1", "member-2": "value1", "member-3": "value1"}
        record = get(management, "ClusterStagedUpdateRun", "rolled-2").status["rollout"]
        back = record["rollback"]
        assert [s["name"] for s in back["stages"]] == ["canary", "staging"]
        assert [s["clusters"] for s in back["stages"]] == [
            [f"{MEMBER_NS}/member-3", f"{MEMBER_NS}/member-1"],
            [f"{MEMBER_NS}/member-2"],
        ]
        assert all(s["phase"] == "Succeeded" for s in back["stages"])
        assert back["stages"][0]["succeededAt"] <= back["stages"][1]["startedAt"]

        def told() -> dict[str, Any] | None:
            # Events are written in the background, after the status that announces them: the
            # last one may not be there yet the moment the run has ended.
            seen = json.loads(_fleetwave(kubeconfig, "history", "run", "rolled-2", "-o", "json"))
            return seen if "RolledBack" in [e["reason"] for e in seen["events"]] else None

        history = wait_for(told, what="the RolledBack Event in the run's history", timeout=30)
        assert [(r["run"], r["snapshotIndex"], r["outcome"]) for r in history["runs"]] == [
            ("rolled-1", "0", "Succeeded"),
            ("rolled-2", "1", "RolledBack"),
        ]
        assert history["runs"][1]["rolledBackTo"] == "resource snapshot 0"
        reasons = [e["reason"] for e in history["events"]]
        assert "RollingBack" in reasons
        assert "RolledBack" in reasons
        # The fleet overview (`fleetwave status`): one line per rollout, as JSON and as a table.
        lines = json.loads(_fleetwave(kubeconfig, "status", "-o", "json"))["rollouts"]
        mine = {r["name"]: r for r in lines if r["kind"] == "ClusterStagedUpdateRun"}
        assert mine["rolled-2"]["phase"] == "RolledBack"
        assert mine["rolled-2"]["waitingFor"].startswith("rolled back to resource snapshot 0")
        assert mine["rolled-1"]["phase"] == "Succeeded"
        assert "rolled-2" in _fleetwave(kubeconfig, "status")
        # kubectl's other outputs: `kind/name` lines, and a wider table with the API version.
        assert (
            "clusterstagedupdaterun/rolled-2" in _fleetwave(kubeconfig, "status", "-o", "name").splitlines()
        )
        assert "placement.kubernetes-fleet.io" in _fleetwave(kubeconfig, "status", "-o", "wide") or (
            "fleetwave.io" in _fleetwave(kubeconfig, "status", "-o", "wide")
        )
        clusters = json.loads(_fleetwave(kubeconfig, "cluster", "list", "-o", "json"))["clusters"]
        assert {c["name"] for c in clusters} >= {"member-1", "member-2", "member-3"}
        assert all(c["ready"] for c in clusters if c["name"].startswith("member-"))
        assert (
            "membercluster/member-1" in _fleetwave(kubeconfig, "cluster", "list", "-o", "name").splitlines()
        )
    finally:
        delete_all(
            management,
            ("ClusterStagedUpdateRun", "rolled-1"),
            ("ClusterStagedUpdateRun", "rolled-2"),
            ("ClusterStagedUpdateStrategy", strategy),
            ("ClusterResourcePlacement", crp),
        )
        wait_for(lambda: found(management, "ClusterResourcePlacement", crp) is None, what="placement gone")


def test_fleetwave_rollback_run_returns_a_succeeded_run_to_the_previous_good_snapshot(
    controller: Controllers,
    management: Client,
    members: dict[str, Client],
    hub_ns: str,
    local_fleet: fleet.FleetState,
) -> None:
    """`fleetwave rollback run NAME` on a run that succeeded: refused while no earlier run
    succeeded; then every cluster returns to the previous run's snapshot and the run ends
    UpdateRunRolledBack."""
    crp, strategy = "asked", "asked-strategy"
    kubeconfig = local_fleet.cluster(fleet.MANAGEMENT).kubeconfig
    two_snapshots(management, crp, hub_ns)
    apply(management, _all_at_once(strategy))
    try:
        apply(management, run_doc("asked-1", crp, "0", strategy))
        wait_for(lambda: succeeded(management, "ClusterStagedUpdateRun", "asked-1"), what="run 1 succeeded")
        refused = CliRunner().invoke(cli.app, ["rollback", "run", "asked-1", "--kubeconfig", kubeconfig])
        assert refused.exit_code == 1
        assert "nothing to roll back to" in refused.output
        apply(management, run_doc("asked-2", crp, "1", strategy))
        wait_for(lambda: succeeded(management, "ClusterStagedUpdateRun", "asked-2"), what="run 2 succeeded")
        assert set(_values(members, hub_ns).values()) == {"value2"}
        said = _fleetwave(kubeconfig, "rollback", "run", "asked-2")
        assert "rolling resource snapshot 1 back to resource snapshot 0" in said

        def rolled_back() -> bool:
            done = cond(get(management, "ClusterStagedUpdateRun", "asked-2"), "Succeeded")
            return done.get("reason") == "UpdateRunRolledBack"

        wait_for(rolled_back, what="run 2 rolled back")
        assert set(_values(members, hub_ns).values()) == {"value1"}
        again = _fleetwave(kubeconfig, "rollback", "run", "asked-2")
        assert "already RolledBack" in again
    finally:
        delete_all(
            management,
            ("ClusterStagedUpdateRun", "asked-1"),
            ("ClusterStagedUpdateRun", "asked-2"),
            ("ClusterStagedUpdateStrategy", strategy),
            ("ClusterResourcePlacement", crp),
        )
        wait_for(lambda: found(management, "ClusterResourcePlacement", crp) is None, what="placement gone")


@pytest.fixture
def hook_server() -> Iterator[tuple[str, list[str]]]:
    """Answers each path 503 the first time, then 200 {"ready": true}; records the paths of GETs."""
    paths: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            paths.append(self.path)
            code, body = (503, b"{}") if paths.count(self.path) == 1 else (200, b'{"ready": true}')
            self.send_response(code)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_args: Any) -> None:
            return

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", paths
    finally:
        server.shutdown()
        server.server_close()


def test_a_staged_runs_stage_webhook_per_cluster_gates_the_next_stage(
    controller: Controllers,
    management: Client,
    members: dict[str, Client],
    hub_ns: str,
    hook_server: tuple[str, list[str]],
) -> None:
    url, paths = hook_server
    crp = f"hooked-placement-{hub_ns}"
    apply(management, crp_doc(crp, hub_ns))
    wait_for(
        lambda: snapshot_labels(management, "ClusterResourceSnapshot", f"{crp}-0-snapshot"), what="snapshot 0"
    )
    strategy = seed_strategy(f"hooked-{hub_ns}")
    staging = strategy["spec"]["stages"][0]
    staging.pop("afterStageTasks")
    staging["webhooks"] = [
        {
            "name": "smoke",
            "url": f"{url}/smoke/${{MEMBER-CLUSTER-NAME}}",
            "method": "GET",
            "perCluster": True,
            "retries": 0,
            "interval": "1s",
            "successCondition": "body.ready",
        }
    ]
    strategy["spec"]["stages"][1].pop("afterStageTasks")
    apply(management, strategy)
    run = f"hooked-run-{hub_ns}"
    apply(management, run_doc(run, crp, "0", f"hooked-{hub_ns}"))

    def held() -> bool:
        return "webhook smoke not passing for cluster" in json.dumps(
            get(management, "ClusterStagedUpdateRun", run).status or {}
        )

    wait_for(held, what="staging held by its webhook's 503")
    assert cm_value(members["member-1"], hub_ns) is None  # canary not started while staging's webhook fails
    assert cm_value(members["member-3"], hub_ns) is None
    wait_for(
        lambda: cond(get(management, "ClusterStagedUpdateRun", run), "Succeeded").get("status") == "True",
        what="run succeeded once the webhook passed",
    )
    assert all(cm_value(m, hub_ns) == "value1" for m in members.values())
    assert paths[0] == f"/smoke/{MEMBER_NS}/member-2"  # only staging's cluster is called, by its name
    assert set(paths) == {f"/smoke/{MEMBER_NS}/member-2"}
    assert len(paths) >= 2
    management.delete(kinds.resource("ClusterResourcePlacement"), crp)


def test_a_staged_runs_stage_analysis_per_cluster_gates_the_next_stage(
    controller: Controllers,
    management: Client,
    members: dict[str, Client],
    hub_ns: str,
    prometheus: local_prometheus.Prometheus,
) -> None:
    """ADR 0081: a perCluster analysis on staging queries the series labelled with staging's cluster
    (`${MEMBER-CLUSTER-NAME}`); it holds the canary while measurements are taken, then lets it go.
    A query naming another cluster would find no series, fail, and hold the run for good."""
    job = f"staged-{uuid.uuid4().hex[:8]}"
    cluster = f"{MEMBER_NS}/member-2"
    series = f'fleetwave_analysis_errors{{job="{job}",cluster="{cluster}"}}'
    push(prometheus, job, f'fleetwave_analysis_errors{{cluster="{cluster}"}} 0', until=(series, 0.0))
    crp = f"analysed-placement-{hub_ns}"
    apply(management, crp_doc(crp, hub_ns))
    wait_for(
        lambda: snapshot_labels(management, "ClusterResourceSnapshot", f"{crp}-0-snapshot"), what="snapshot 0"
    )
    strategy = seed_strategy(f"analysed-{hub_ns}")
    staging = strategy["spec"]["stages"][0]
    staging.pop("afterStageTasks")
    staging["analyses"] = [
        {
            "name": "errors",
            "prometheus": {"url": prometheus.url},
            "query": f'fleetwave_analysis_errors{{job="{job}",cluster="${{MEMBER-CLUSTER-NAME}}"}}',
            "successCondition": "result == 0.0",
            "interval": "1s",
            "count": 3,
            "perCluster": True,
        }
    ]
    strategy["spec"]["stages"][1].pop("afterStageTasks")
    apply(management, strategy)
    run = f"analysed-run-{hub_ns}"
    apply(management, run_doc(run, crp, "0", f"analysed-{hub_ns}"))

    def measuring() -> bool:
        return "analysis errors: " in json.dumps(get(management, "ClusterStagedUpdateRun", run).status or {})

    wait_for(measuring, what="staging waiting on its analysis' measurements")
    assert cm_value(members["member-1"], hub_ns) is None  # canary not started while staging is measured
    wait_for(
        lambda: cond(get(management, "ClusterStagedUpdateRun", run), "Succeeded").get("status") == "True",
        what="run succeeded once the analysis passed",
    )
    assert all(cm_value(m, hub_ns) == "value1" for m in members.values())
    management.delete(kinds.resource("ClusterResourcePlacement"), crp)


def _strategy_of(name: str, stages: list[dict[str, Any]]) -> dict[str, Any]:
    doc = {"apiVersion": API, "kind": "ClusterStagedUpdateStrategy", "metadata": {"name": name}}
    return {**doc, "spec": {"stages": stages}}


def _initialization_failure(management: Client, run: str) -> dict[str, Any]:
    obj = found(management, "ClusterStagedUpdateRun", run)
    initialized = cond(obj, "Initialized") if obj is not None else {}
    return initialized if initialized.get("status") == "False" else {}


def test_a_run_whose_strategy_leaves_a_picked_cluster_in_no_stage_or_two_fails_initialization(
    controller: Controllers, management: Client, members: dict[str, Client], hub_ns: str
) -> None:
    """ADR 0112: upstream's abort, naming the clusters and stages; nothing reaches a member."""
    crp = f"misfit-{hub_ns}"
    canary = {"name": "canary", "labelSelector": {"matchLabels": {"environment": "canary"}}}
    apply(management, crp_doc(crp, hub_ns))  # PickAll: member-1..3
    apply(management, _strategy_of("misfit-none", [canary]))  # member-2 (staging) in no stage
    apply(management, _strategy_of("misfit-two", [canary, {"name": "everyone", "labelSelector": {}}]))
    try:
        wait_for(
            lambda: snapshot_labels(management, "ClusterResourceSnapshot", f"{crp}-0-snapshot"),
            what="snapshot",
        )
        apply(management, run_doc("misfit-none-run", crp, "0", "misfit-none"))
        apply(management, run_doc("misfit-two-run", crp, "0", "misfit-two"))
        none = wait_for(lambda: _initialization_failure(management, "misfit-none-run"), what="no stage")
        two = wait_for(lambda: _initialization_failure(management, "misfit-two-run"), what="two stages")
        assert none["reason"] == two["reason"] == "UpdateRunInitializedFailed"
        assert none["message"] == (
            "some clusters are not placed in any stage (canary), total 1, showing up to 10: member-2"
        )
        assert two["message"] == (
            "clusters appear in more than one stages, total 2, showing up to 10:"
            " `member-1` (stages canary, everyone), `member-3` (stages canary, everyone)"
        )
        for run in ("misfit-none-run", "misfit-two-run"):  # the run does not progress
            status = get(management, "ClusterStagedUpdateRun", run).status or {}
            assert not status.get("stagesStatus"), status
            assert [c["type"] for c in status.get("conditions") or []] == ["Initialized"]
        assert [cm_value(members[m], hub_ns) for m in sorted(members)] == [None, None, None]
    finally:
        delete_all(
            management,
            ("ClusterStagedUpdateRun", "misfit-none-run"),
            ("ClusterStagedUpdateRun", "misfit-two-run"),
            ("ClusterStagedUpdateStrategy", "misfit-none"),
            ("ClusterStagedUpdateStrategy", "misfit-two"),
            ("ClusterResourcePlacement", crp),
        )

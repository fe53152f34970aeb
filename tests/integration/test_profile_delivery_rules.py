"""ClusterProfile delivery rules on the real fleet.

Two profiles that deploy the same object to one cluster (ADR 0063): the lower tier takes it over,
the other reports the conflict by name and — with maxConsecutiveFailures — stops retrying;
continueOnConflict lets the rest of a profile through. preDeployChecks hold a delivery until they
pass; preDeleteChecks and postDeleteChecks hold a withdrawal before and after it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from lightkube import ApiError, Client, codecs
from lightkube.resources.core_v1 import ConfigMap, Event
from promotion_support import ControllerThread, registered, relabel, running_controller, wait_for

from fleetwave.kube import kinds
from fleetwave.local import binaries, fleet
from fleetwave.mgmt import manifests


@pytest.fixture(scope="module")
def controller(
    local_fleet: fleet.FleetState, management: Client, bins: binaries.Binaries
) -> Iterator[ControllerThread]:
    with (
        registered(management, local_fleet),
        running_controller(local_fleet, bins.path("helm"), "conflicts") as thread,
    ):
        yield thread


def _cm(namespace: str, name: str, **data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": data,
    }


def _profile(name: str, namespace: str, objects: list[dict[str, Any]], **spec: Any) -> list[dict[str, Any]]:
    source = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"content-{name}", "namespace": "default"},
        "data": {"content.yaml": yaml.safe_dump_all(objects)},
    }
    profile = {
        "apiVersion": "fleetwave.io/v1alpha1",
        "kind": "ClusterProfile",
        "metadata": {"name": name},
        "spec": {
            "clusterSelector": {"matchLabels": {"env": "dev"}},  # member-1 only
            "policyRefs": [{"kind": "ConfigMap", "name": f"content-{name}", "namespace": "default"}],
            **spec,
        },
    }
    return [source, profile]


def _summary(management: Client, profile: str) -> dict[str, Any]:
    found = list(
        management.list(
            kinds.resource("ClusterSummary"), namespace="*", labels={"fleetwave.io/cluster-profile": profile}
        )
    )
    return dict(found[0].status or {}) if found else {}


def _ready(management: Client, profile: str) -> dict[str, Any]:
    conditions = _summary(management, profile).get("conditions") or []
    return next((c for c in conditions if c["type"] == "Ready"), {})


def _data(member: Client, namespace: str, name: str) -> dict[str, str] | None:
    try:
        return dict(member.get(ConfigMap, name, namespace=namespace).data or {})
    except ApiError as err:
        if err.status.code == 404:
            return None
        raise


def test_a_lower_tier_takes_an_object_over_and_the_other_profile_gives_up_after_its_failures(
    controller: ControllerThread, management: Client, members: dict[str, Client], namespace: str
) -> None:
    member = members["member-1"]
    names = ("base", "override", "late")
    try:
        manifests.apply(
            management,
            _profile(
                "base",
                namespace,
                [_cm(namespace, "shared", owner="base")],
                syncMode="ContinuousWithDriftDetection",  # re-applies on its own: meets the conflict
                maxConsecutiveFailures=2,
            ),
        )
        wait_for(lambda: _ready(management, "base").get("status") == "True", what="base delivered")
        assert _data(member, namespace, "shared") == {"owner": "base"}, _summary(management, "base")

        manifests.apply(
            management, _profile("override", namespace, [_cm(namespace, "shared", owner="override")], tier=50)
        )
        wait_for(lambda: _ready(management, "override").get("status") == "True", what="override delivered")
        assert _data(member, namespace, "shared") == {"owner": "override"}

        # base meets the conflict on its next pass, names who has the object, and stops retrying.
        features = wait_for(
            lambda: [
                f
                for f in _summary(management, "base").get("featureSummaries") or []
                if f.get("status") == "FailedNonRetriable"
            ],
            timeout=180,
            what="base gives up",
        )
        assert features[0]["consecutiveFailures"] == 2
        message = _ready(management, "base")["message"]
        assert "already deployed by ClusterProfile/" in message
        assert "override" in message
        assert "(tier 50)" in message
        assert "gave up after 2 consecutive failures" in message
        assert _data(member, namespace, "shared") == {"owner": "override"}

        # continueOnConflict: the object in conflict is reported, the others are delivered.
        manifests.apply(
            management,
            _profile(
                "late",
                namespace,
                [_cm(namespace, "shared", owner="late"), _cm(namespace, "late-only", owner="late")],
                continueOnConflict=True,
            ),
        )
        wait_for(
            lambda: _data(member, namespace, "late-only") == {"owner": "late"}, what="late-only delivered"
        )
        ready = wait_for(
            lambda: (
                _ready(management, "late")
                if "conflict" in _ready(management, "late").get("message", "")
                else None
            ),
            what="late reports its conflict",
        )
        assert ready["status"] == "False"
        assert _data(member, namespace, "shared") == {"owner": "override"}
    finally:
        for name in names:
            try:
                management.delete(kinds.resource("ClusterProfile"), name)
            except ApiError as err:
                if err.status.code != 404:
                    raise
        wait_for(lambda: not any(_summary(management, n) for n in names), what="summaries withdrawn")


def _exists_check(name: str, namespace: str, resource: str, rule: str = "true") -> dict[str, Any]:
    return {
        "name": name,
        "featureID": "Resources",
        "group": "",
        "version": "v1",
        "kind": "ConfigMap",
        "namespace": namespace,
        "resourceName": resource,
        "evaluateCEL": [{"name": name, "rule": rule}],
    }


def _summaries(management: Client, profile: str) -> list[Any]:
    return list(
        management.list(
            kinds.resource("ClusterSummary"), namespace="*", labels={"fleetwave.io/cluster-profile": profile}
        )
    )


def test_pre_deploy_checks_hold_delivery_and_delete_checks_hold_the_withdrawal(
    controller: ControllerThread, management: Client, members: dict[str, Client], namespace: str
) -> None:
    member = members["member-1"]
    name = "guarded"

    def mark(resource: str, **data: str) -> None:
        member.apply(codecs.from_dict(_cm(namespace, resource, **data)), field_manager="test", force=True)

    manifests.apply(
        management,
        _profile(
            name,
            namespace,
            [_cm(namespace, "payload", v="1")],
            preDeployChecks=[_exists_check("gate", namespace, "gate", "self.data.go == 'yes'")],
            preDeleteChecks=[_exists_check("may-delete", namespace, "may-delete")],
            postDeleteChecks=[_exists_check("cleaned-up", namespace, "cleaned-up")],
        ),
    )
    try:
        ready = wait_for(
            lambda: (
                r if (r := _ready(management, name)).get("reason") == "WaitingForPreDeployChecks" else None
            ),
            what="delivery held by preDeployChecks",
        )
        assert "health check 'gate'" in ready["message"]
        assert "no resource matched" in ready["message"]
        mark("gate", go="no")
        wait_for(
            lambda: (
                "is Degraded" in _ready(management, name).get("message", "")
                or "no CEL rule holds" in _ready(management, name).get("message", "")
            ),
            what="the gate's rule judged",
        )
        assert _data(member, namespace, "payload") is None  # nothing deployed while the check fails
        mark("gate", go="yes")
        wait_for(
            lambda: _ready(management, name).get("status") == "True", what="delivered once the gate opens"
        )
        assert _data(member, namespace, "payload") == {"v": "1"}

        # Deleting: preDeleteChecks hold the withdrawal, postDeleteChecks hold the summary after it.
        management.delete(kinds.resource("ClusterProfile"), name)
        time.sleep(3)
        assert _summaries(management, name), "the summary went before preDeleteChecks passed"
        assert _data(member, namespace, "payload") == {"v": "1"}
        mark("may-delete")
        wait_for(
            lambda: _data(member, namespace, "payload") is None, what="withdrawn once preDeleteChecks pass"
        )
        time.sleep(3)
        assert _summaries(management, name), "the summary went before postDeleteChecks passed"
        events = [
            e.reason
            for e in summary_events(management)
            if e.involvedObject.kind == "ClusterSummary" and (e.involvedObject.name or "").startswith(name)
        ]
        assert "PreDeleteChecksFailing" in events
        assert "PostDeleteChecksFailing" in events
        mark("cleaned-up")
        wait_for(lambda: not _summaries(management, name), what="summary gone once postDeleteChecks pass")
    finally:
        try:
            management.delete(kinds.resource("ClusterProfile"), name)
        except ApiError as err:
            if err.status.code != 404:
                raise
        mark("may-delete")
        mark("cleaned-up")
        wait_for(lambda: not _summaries(management, name), what="summaries withdrawn")


def summary_events(management: Client) -> list[Any]:
    return list(management.list(Event, namespace="*"))


def _local_note(management: Client, namespace: str) -> Any | None:
    try:
        return management.get(ConfigMap, "local-note", namespace=namespace)
    except ApiError as err:
        if err.status.code == 404:
            return None
        raise


@pytest.mark.parametrize("kind", ["ClusterProfile", "ClusterPromotion"])
def test_local_content_goes_to_the_management_cluster_once_and_leaves_with_its_owner(
    controller: ControllerThread, management: Client, members: dict[str, Client], namespace: str, kind: str
) -> None:
    name = f"local-{kind.lower()}"
    local = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"content-{name}-local", "namespace": "default"},
        "data": {"content.yaml": yaml.safe_dump(_cm(namespace, "local-note", where="management"))},
    }
    docs = _profile(name, namespace, [_cm(namespace, "remote-note", where="member")])
    spec = docs[1]["spec"]
    spec["policyRefs"].append(
        {
            "kind": "ConfigMap",
            "name": f"content-{name}-local",
            "namespace": "default",
            "deploymentType": "Local",
        }
    )
    if kind == "ClusterPromotion":  # the same content as a promotion's profileSpec, one stage
        selector = spec.pop("clusterSelector")
        docs[1] = {
            "apiVersion": "fleetwave.io/v1alpha1",
            "kind": "ClusterPromotion",
            "metadata": {"name": name},
            "spec": {"profileSpec": spec, "stages": [{"name": "dev", "clusterSelector": selector}]},
        }
    manifests.apply(management, [local, *docs])
    try:
        wait_for(
            lambda: _data(members["member-1"], namespace, "remote-note"), what="remote content delivered"
        )
        # fleetwave grants nothing for Local content: the controller's account may not write there
        # until an admin says so, and the rollout object says why.
        refused = wait_for(
            lambda: _local_status(management, kind, name).get("errors"), what="refused by RBAC"
        )
        assert "forbidden" in refused[0]
        assert _local_note(management, namespace) is None
        manifests.apply(management, _local_rights(namespace))
        note = wait_for(
            lambda: _local_note(management, namespace), what="Local content in the management cluster"
        )
        assert note.data == {"where": "management"}
        owners = [(r.kind, r.name) for r in note.metadata.ownerReferences or []]
        assert owners == [(kind, name)]  # the rollout object, never a stage profile or a summary
        assert _data(members["member-1"], namespace, "local-note") is None  # never sent to a member
        status = wait_for(
            lambda: s if (s := _local_status(management, kind, name)) and not s.get("errors") else None,
            what="Local content reported applied",
        )
        assert status["deployedKinds"] == ["ConfigMap.v1."]
    finally:
        management.delete(kinds.resource(kind), name)
    wait_for(lambda: _local_note(management, namespace) is None, what="Local content garbage-collected")


def _local_status(management: Client, kind: str, name: str) -> dict[str, Any]:
    return dict((management.get(kinds.resource(kind), name).status or {}).get("localContent") or {})


def _local_rights(namespace: str) -> list[dict[str, Any]]:
    """What a platform admin grants for Local content: here, ConfigMaps in one namespace."""
    meta = {"name": "fleetwave-local-content", "namespace": namespace}
    verbs = ["get", "create", "patch", "delete"]
    account = {"kind": "ServiceAccount", "name": "fleetwave-controller", "namespace": "fleetwave-system"}
    return [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": meta,
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": verbs}],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": meta,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": meta["name"]},
            "subjects": [account],
        },
    ]


def test_a_cluster_that_comes_to_match_after_the_plan_froze_receives_the_content_and_loses_it_after(
    controller: ControllerThread, management: Client, members: dict[str, Client], namespace: str
) -> None:
    """ADR 0032 and 0144: a cluster outside the frozen plan that comes to match the profile joins it
    (reported once, delivered once its stage succeeded); it leaves again when it stops matching."""
    name = "joiner"
    manifests.apply(management, _profile(name, namespace, [_cm(namespace, "joined", by=name)]))
    try:
        wait_for(lambda: _ready(management, name).get("status") == "True", what="member-1 delivered")
        # A plain profile lists its progress (a promotion's stage profile does not: ADR 0145).
        updated = management.get(kinds.resource("ClusterProfile"), name).status["updatedClusters"]
        assert [c["name"] for c in updated["clusters"]] == ["member-1"]
        assert _data(members["member-2"], namespace, "joined") is None  # env=staging: not matched
        relabel(management, "member-2", "dev")
        on_member_2 = lambda: _data(members["member-2"], namespace, "joined")  # noqa: E731
        wait_for(lambda: on_member_2() == {"by": name}, what="the joiner delivered")
        record = management.get(kinds.resource("ClusterProfile"), name).status["rollout"]
        assert record["lateJoiners"] == [["fleetwave-system/member-2", 0]], record
        assert len(_summaries(management, name)) == 2
        events = [e for e in management.list(Event, namespace="*") if e.reason == "ClusterJoined"]
        assert [e.message for e in events if e.involvedObject.name == name] == [
            "cluster fleetwave-system/member-2 joined after the plan was frozen (matches stage joiner)"
        ]
        relabel(management, "member-2", "staging")
        wait_for(lambda: on_member_2() is None, what="withdrawn from it")
        assert _data(members["member-1"], namespace, "joined") == {"by": name}
    finally:
        relabel(management, "member-2", "staging")
        management.delete(kinds.resource("ClusterProfile"), name)
        wait_for(lambda: not _summaries(management, name), what="summaries withdrawn")

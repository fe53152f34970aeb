"""Raw manifests reach a real member by server-side apply, and are pruned, withdrawn and drift-checked."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from lightkube import ApiError, Client
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import ConfigMap

from fleetwave.delivery import content, manifests
from fleetwave.delivery.target import MemberTarget, MemberUnreachable
from fleetwave.kube.kinds import GVK
from fleetwave.local import fleet


def _configmap(namespace: str, name: str, **data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": data,
    }


def _deployment(namespace: str, name: str, replicas: int = 1) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "app", "image": "registry.invalid/app:1"}]},
            },
        },
    }


@pytest.fixture
def target(local_fleet: fleet.FleetState) -> MemberTarget:
    member = local_fleet.members[0]
    return MemberTarget.from_file(member.name, member.kubeconfig)


@pytest.fixture
def member(local_fleet: fleet.FleetState, members: dict[str, Client]) -> Client:
    return members[local_fleet.members[0].name]


@pytest.fixture
def inventory() -> str:
    # Deliberately not label-safe: the delivery layer must derive a valid label value.
    return f"ClusterProfile/demo-{uuid.uuid4().hex[:6]}/dev01"


def _absent(client: Client, kind: type[Any], name: str, namespace: str) -> bool:
    try:
        obj = client.get(kind, name, namespace=namespace)
    except ApiError as err:
        return err.status.code == 404
    return obj.metadata is not None and obj.metadata.deletionTimestamp is not None


async def test_apply_labels_objects_and_a_second_apply_changes_nothing(
    target: MemberTarget, member: Client, namespace: str, inventory: str
) -> None:
    desired = [_deployment(namespace, "web"), _configmap(namespace, "web-config", greeting="hi")]

    first = await manifests.apply(target, desired, inventory=inventory)
    assert first.ok, first.errors
    assert [o.ref.kind for o in first.objects] == ["ConfigMap", "Deployment"]  # dependency order
    assert {o.action for o in first.objects} == {"created"}
    key = content.inventory_key(inventory)
    cm = member.get(ConfigMap, "web-config", namespace=namespace)
    assert cm.metadata is not None
    assert cm.metadata.labels is not None
    assert cm.metadata.labels[content.INVENTORY_LABEL] == key
    assert cm.data == {"greeting": "hi"}
    managers = {m.manager for m in cm.metadata.managedFields or []}
    assert "fleetwave" in managers

    second = await manifests.apply(target, desired, inventory=inventory)
    assert second.ok
    assert not second.changed
    assert {o.action for o in second.objects} == {"unchanged"}
    assert second.content_hash == first.content_hash
    assert second.kinds == {GVK("v1", "ConfigMap"), GVK("apps/v1", "Deployment")}


async def test_dry_run_reports_what_would_change_and_changes_nothing(
    target: MemberTarget, member: Client, namespace: str, inventory: str
) -> None:
    await manifests.apply(target, [_configmap(namespace, "settings", level="1")], inventory=inventory)
    before = member.get(ConfigMap, "settings", namespace=namespace)

    desired = [_configmap(namespace, "settings", level="2"), _configmap(namespace, "extra", x="y")]
    report = await manifests.apply(target, desired, inventory=inventory, dry_run=True)

    assert report.ok, report.errors
    assert report.dry_run
    actions = {o.ref.name: o.action for o in report.objects}
    assert actions == {"settings": "configured", "extra": "created"}
    after = member.get(ConfigMap, "settings", namespace=namespace)
    assert after.data == {"level": "1"}
    assert after.metadata is not None
    assert before.metadata is not None
    assert after.metadata.resourceVersion == before.metadata.resourceVersion
    assert _absent(member, ConfigMap, "extra", namespace)

    unchanged = await manifests.apply(
        target, [_configmap(namespace, "settings", level="1")], inventory=inventory, dry_run=True
    )
    assert [o.action for o in unchanged.objects] == ["unchanged"]


async def test_prune_removes_only_what_left_the_desired_set(
    target: MemberTarget, member: Client, namespace: str, inventory: str
) -> None:
    a, b = _configmap(namespace, "keep-me", v="1"), _configmap(namespace, "drop-me", v="1")
    unrelated = _configmap(namespace, "someone-elses", v="1")
    first = await manifests.apply(target, [a, b], inventory=inventory)
    await manifests.apply(target, [unrelated], inventory=f"{inventory}-other")

    second = await manifests.apply(target, [a], inventory=inventory)
    deleted = await manifests.prune(target, inventory=inventory, kinds=first.kinds, keep=second.refs)

    assert [r.name for r in deleted] == ["drop-me"]
    assert _absent(member, ConfigMap, "drop-me", namespace)
    assert member.get(ConfigMap, "keep-me", namespace=namespace).data == {"v": "1"}
    assert member.get(ConfigMap, "someone-elses", namespace=namespace).data == {"v": "1"}
    again = await manifests.prune(target, inventory=inventory, kinds=first.kinds, keep=second.refs)
    assert again == []


async def test_withdraw_removes_everything_of_the_inventory(
    target: MemberTarget, member: Client, namespace: str, inventory: str
) -> None:
    report = await manifests.apply(
        target, [_configmap(namespace, "one"), _deployment(namespace, "two")], inventory=inventory
    )
    deleted = await manifests.withdraw(target, inventory=inventory, kinds=report.kinds)

    assert {(r.kind, r.name) for r in deleted} == {("ConfigMap", "one"), ("Deployment", "two")}
    assert _absent(member, ConfigMap, "one", namespace)
    assert _absent(member, Deployment, "two", namespace)


async def test_drift_from_another_field_manager_is_detected_and_repaired_by_reapply(
    target: MemberTarget, member: Client, namespace: str, inventory: str
) -> None:
    desired = [_configmap(namespace, "tuned", limit="10"), _deployment(namespace, "svc", replicas=1)]
    await manifests.apply(target, desired, inventory=inventory)
    assert await manifests.detect_drift(target, desired, inventory=inventory) == []

    # Someone edits the object by hand (a plain update under another field manager).
    cm = member.get(ConfigMap, "tuned", namespace=namespace)
    cm.data = {"limit": "99"}
    member.replace(cm, field_manager="kubectl-edit")
    member.delete(Deployment, "svc", namespace=namespace)

    drifts = await manifests.detect_drift(target, desired, inventory=inventory)
    by_name = {d.ref.name: d for d in drifts}
    assert set(by_name) == {"tuned", "svc"}
    assert by_name["tuned"].reason == "conflict"
    assert "data.limit" in by_name["tuned"].message
    assert by_name["svc"].reason == "missing"
    assert member.get(ConfigMap, "tuned", namespace=namespace).data == {
        "limit": "99"
    }  # detection is read-only

    repaired = await manifests.apply(target, desired, inventory=inventory)
    assert {o.ref.name: o.action for o in repaired.objects} == {"tuned": "configured", "svc": "created"}
    assert member.get(ConfigMap, "tuned", namespace=namespace).data == {"limit": "10"}
    assert await manifests.detect_drift(target, desired, inventory=inventory) == []


async def test_an_invalid_object_is_reported_and_the_rest_still_apply(
    target: MemberTarget, member: Client, namespace: str, inventory: str
) -> None:
    bad = _deployment(namespace, "broken")
    bad["spec"]["replicas"] = True
    report = await manifests.apply(target, [bad, _configmap(namespace, "fine")], inventory=inventory)

    assert not report.ok
    failed = [o for o in report.objects if o.action == "failed"]
    assert [o.ref.name for o in failed] == ["broken"]
    assert failed[0].error
    assert "replicas" in failed[0].error
    assert member.get(ConfigMap, "fine", namespace=namespace).metadata is not None


async def test_a_member_whose_api_server_is_down_raises_member_unreachable(
    dead_target: MemberTarget, namespace: str
) -> None:
    with pytest.raises(MemberUnreachable) as err:
        await manifests.apply(dead_target, [_configmap(namespace, "never")], inventory="x")
    assert err.value.cluster == "dead"


def _crd(group: str) -> dict[str, Any]:
    schema = {
        "type": "object",
        "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList"},
            "versions": [
                {"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": schema}}
            ],
        },
    }


async def test_a_crd_and_its_custom_resources_apply_in_order_and_withdraw_in_reverse(
    target: MemberTarget, namespace: str, inventory: str
) -> None:
    group = f"t{uuid.uuid4().hex[:8]}.fleetwave.test"
    widget = {
        "apiVersion": f"{group}/v1",
        "kind": "Widget",
        "metadata": {"name": "w1", "namespace": namespace},
        "spec": {"size": 3},
    }
    desired = [widget, _crd(group)]  # written in the "wrong" order on purpose

    planned = await manifests.apply(target, desired, inventory=inventory, dry_run=True)
    assert [(o.ref.kind, o.action) for o in planned.objects] == [
        ("CustomResourceDefinition", "created"),
        ("Widget", "created"),
    ]
    assert planned.ok, planned.errors

    applied = await manifests.apply(target, desired, inventory=inventory)
    assert applied.ok, applied.errors
    assert [(o.ref.kind, o.action) for o in applied.objects] == [
        ("CustomResourceDefinition", "created"),
        ("Widget", "created"),
    ]
    assert await manifests.detect_drift(target, desired, inventory=inventory) == []

    # A fresh session knows Widget only through discovery of its group/version.
    deleted = await manifests.withdraw(target, inventory=inventory, kinds=applied.kinds)
    assert [r.kind for r in deleted] == ["Widget", "CustomResourceDefinition"]

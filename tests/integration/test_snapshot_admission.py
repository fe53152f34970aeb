"""Snapshots are immutable and only fleetwave cuts them (ADR 0112), on the real API server with the
policy `fleetwave install` puts in: an edit of a resource or override snapshot's spec is refused
even to an admin; a tenant allowed by RBAC to create snapshots cannot make one carrying a
placement's labels, nor label one afterwards; the controller (its ServiceAccount) still cuts,
relabels and prunes snapshots, and the placement delivers a new revision to the members."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lightkube import ApiError, Client, codecs
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.models.rbac_v1 import PolicyRule, RoleRef, Subject
from lightkube.resources.core_v1 import ConfigMap, ServiceAccount
from lightkube.resources.rbac_authorization_v1 import ClusterRole, ClusterRoleBinding
from lightkube.types import PatchType
from promotion_support import ControllerThread, service_account_kubeconfig, settings, wait_for

from fleetwave.api import snapshot_admission
from fleetwave.kube import client as kubeclient
from fleetwave.kube import kinds
from fleetwave.local import binaries, fleet
from fleetwave.mgmt import install, registration

MEMBER_NS = "sa-members"
API = f"{kinds.GROUP}/{kinds.VERSION}"
FORGER = "snapshot-forger"
REFUSED = (400, 403, 422)


@pytest.fixture(scope="module")
def controller(local_fleet: fleet.FleetState, management: Client, bins: binaries.Binaries) -> Iterator[None]:
    install.install(management)
    for member in local_fleet.members:
        registration.register(
            management,
            name=member.name,
            namespace=MEMBER_NS,
            kubeconfig=Path(member.kubeconfig).read_bytes(),
            labels={},
        )
    kubeconfig = local_fleet.cluster(fleet.MANAGEMENT).kubeconfig
    thread = ControllerThread(kubeconfig, settings(bins.path("helm"), f"sa-{uuid.uuid4().hex[:4]}"))
    thread.start()
    try:
        yield
    finally:
        thread.stop()
        for mc in management.list(kinds.resource("MemberCluster"), namespace=MEMBER_NS):
            management.delete(kinds.resource("MemberCluster"), mc.metadata.name, namespace=MEMBER_NS)
    assert thread.error is None, thread.error


@pytest.fixture
def forger(local_fleet: fleet.FleetState, management: Client, hub_ns: str) -> Iterator[Client]:
    """A tenant's account that RBAC lets create and patch snapshots (not an admin, not the controller)."""
    name = f"{FORGER}-{hub_ns}"
    management.create(ServiceAccount(metadata=ObjectMeta(name=FORGER, namespace=hub_ns)))
    plurals = ["clusterresourcesnapshots", "clusterresourceoverridesnapshots"]
    rule = PolicyRule(apiGroups=[kinds.GROUP], resources=plurals, verbs=["get", "create", "patch"])
    management.create(ClusterRole(metadata=ObjectMeta(name=name), rules=[rule]))
    subject = Subject(kind="ServiceAccount", name=FORGER, namespace=hub_ns)
    ref = RoleRef(apiGroup="rbac.authorization.k8s.io", kind="ClusterRole", name=name)
    management.create(ClusterRoleBinding(metadata=ObjectMeta(name=name), roleRef=ref, subjects=[subject]))
    admin = local_fleet.cluster(fleet.MANAGEMENT).kubeconfig
    config = service_account_kubeconfig(admin, namespace=hub_ns, name=FORGER, seconds=3600)
    try:
        yield kubeclient.client(kubeclient.config_from_bytes(config))
    finally:
        management.delete(ClusterRoleBinding, name)
        management.delete(ClusterRole, name)


def _get(client: Client, kind: str, name: str) -> Any | None:
    try:
        return client.get(kinds.resource(kind), name)
    except ApiError as e:
        if e.status.code == 404:
            return None
        raise


def _refusal(act: Any) -> str | None:
    """The API server's refusal of `act`, or None when it was admitted."""
    try:
        act()
    except ApiError as e:
        if e.status.code in REFUSED:
            return str(e.status.message)
        raise
    return None


def _crp(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "ClusterResourcePlacement",
        "metadata": {"name": name},
        "spec": {
            "resourceSelectors": [{"group": "", "kind": "Namespace", "name": namespace, "version": "v1"}],
            "policy": {"placementType": "PickAll"},
        },
    }


def _cro(name: str, placement: str, namespace: str) -> dict[str, Any]:
    patch = {"op": "add", "path": "/metadata/labels", "value": {"overridden": "yes"}}
    return {
        "apiVersion": API,
        "kind": "ClusterResourceOverride",
        "metadata": {"name": name},
        "spec": {
            "placement": {"name": placement},
            "clusterResourceSelectors": [
                {"group": "", "version": "v1", "kind": "Namespace", "name": namespace}
            ],
            "policy": {"overrideRules": [{"jsonPatchOverrides": [patch]}]},
        },
    }


def _forged(name: str, labels: dict[str, str]) -> Any:
    doc = {
        "apiVersion": API,
        "kind": "ClusterResourceSnapshot",
        "metadata": {"name": name, "labels": labels},
        "spec": {"selectedResources": [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}}]},
    }
    return codecs.from_dict(doc)


def _cm_on(member: Client, namespace: str) -> str | None:
    try:
        return (member.get(ConfigMap, "test-cm", namespace=namespace).data or {}).get("key")
    except ApiError as e:
        if e.status.code == 404:
            return None
        raise


def test_snapshots_refuse_spec_edits_and_forged_labels_while_the_controller_cuts_them(
    controller: None, management: Client, members: dict[str, Client], forger: Client, hub_ns: str
) -> None:
    crp, cro = f"immutable-{hub_ns}", f"immutable-cro-{hub_ns}"
    snapshot = kinds.resource("ClusterResourceSnapshot")
    management.apply(codecs.from_dict(_crp(crp, hub_ns)), force=True)
    management.apply(codecs.from_dict(_cro(cro, crp, hub_ns)), force=True)
    try:
        # Cut by the controller's ServiceAccount with the placement's labels: admitted.
        wait_for(lambda: _get(management, "ClusterResourceSnapshot", f"{crp}-0-snapshot"), what="snapshot 0")
        wait_for(lambda: _get(management, "ClusterResourceOverrideSnapshot", f"{cro}-0"), what="override 0")
        emptied = {"spec": {"selectedResources": []}}  # what a `kubectl edit` of the spec sends

        def edit_refused() -> str | None:  # the policy takes effect asynchronously after install
            return _refusal(
                lambda: management.patch(snapshot, f"{crp}-0-snapshot", emptied, patch_type=PatchType.MERGE)
            )

        message = wait_for(edit_refused, what="a snapshot spec edit refused")
        assert snapshot_admission.SPEC_MESSAGE in message
        edited = {"op": "add", "path": "/metadata/labels", "value": {"overridden": "edited"}}
        override_edit = {
            "spec": {"overrideSpec": {"policy": {"overrideRules": [{"jsonPatchOverrides": [edited]}]}}}
        }
        refused = _refusal(
            lambda: management.patch(
                kinds.resource("ClusterResourceOverrideSnapshot"),
                f"{cro}-0",
                override_edit,
                patch_type=PatchType.MERGE,
            )
        )
        assert refused is not None
        assert snapshot_admission.SPEC_MESSAGE in refused
        # Metadata that finds no snapshot stays editable, for an admin and a tenant alike.
        note = {"metadata": {"labels": {"team": "a"}}}
        assert (
            _refusal(lambda: forger.patch(snapshot, f"{crp}-0-snapshot", note, patch_type=PatchType.MERGE))
            is None
        )

        # A tenant: an unlabelled snapshot is admitted (RBAC allows it), a labelled one is not.
        placement = {"kubernetes-fleet.io/parent-CRP": crp, "kubernetes-fleet.io/resource-index": "7"}
        assert _refusal(lambda: forger.create(_forged(f"loose-{hub_ns}", {}))) is None
        refused = _refusal(lambda: forger.create(_forged(f"forged-{hub_ns}", placement)))
        assert refused is not None
        assert snapshot_admission.LABELS_MESSAGE in refused
        relabel = {"metadata": {"labels": placement}}
        refused = _refusal(
            lambda: forger.patch(snapshot, f"loose-{hub_ns}", relabel, patch_type=PatchType.MERGE)
        )
        assert refused is not None
        assert snapshot_admission.LABELS_MESSAGE in refused
        assert _get(management, "ClusterResourceSnapshot", f"forged-{hub_ns}") is None

        # The normal flow: the controller cuts snapshot 1, unmarks 0, and the members get value2.
        wait_for(lambda: all(_cm_on(m, hub_ns) == "value1" for m in members.values()), what="value1")
        management.patch(ConfigMap, "test-cm", {"data": {"key": "value2"}}, namespace=hub_ns)
        wait_for(lambda: _get(management, "ClusterResourceSnapshot", f"{crp}-1-snapshot"), what="snapshot 1")
        wait_for(
            lambda: (
                (_get(management, "ClusterResourceSnapshot", f"{crp}-0-snapshot").metadata.labels or {}).get(
                    "kubernetes-fleet.io/is-latest-snapshot"
                )
                == "false"
            ),
            what="snapshot 0 unmarked by the controller",
        )
        wait_for(
            lambda: all(_cm_on(m, hub_ns) == "value2" for m in members.values()), what="value2 delivered"
        )
    finally:
        for kind, name in (
            ("ClusterResourceOverride", cro),
            ("ClusterResourcePlacement", crp),
            ("ClusterResourceSnapshot", f"loose-{hub_ns}"),
        ):
            try:
                management.delete(kinds.resource(kind), name)
            except ApiError as e:
                if e.status.code != 404:
                    raise

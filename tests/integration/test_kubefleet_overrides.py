"""KubeFleet's overrides on the real local fleet, as upstream's how-tos write them: a placement of a
namespace and its ConfigMap; a ClusterResourceOverride labels what lands on the env=prod clusters
with the member's name, a ResourceOverride replaces a ConfigMap value there. The members' objects
and the placement's per-cluster status are checked; then a bad path fails those clusters without
touching what they hold. Beside them, placement fields seen on the members with the same fleet: a
Delete override rule, NamespaceOnly selection, ServerSideApply's force, revisionHistoryLimit."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lightkube import ApiError, Client, codecs
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import ConfigMap, Namespace
from promotion_support import ControllerThread, settings, wait_for

from fleetwave.kube import kinds
from fleetwave.local import binaries, fleet
from fleetwave.mgmt import install, registration

MEMBER_NS = "ov-members"
LABELS = {"member-1": {"env": "dev"}, "member-2": {"env": "prod"}, "member-3": {"env": "prod"}}
API = f"{kinds.GROUP}/{kinds.VERSION}"
PROD = {"clusterSelectorTerms": [{"labelSelector": {"matchLabels": {"env": "prod"}}}]}


@pytest.fixture(scope="module")
def controller(local_fleet: fleet.FleetState, management: Client, bins: binaries.Binaries) -> Iterator[None]:
    install.install(management)
    for member in local_fleet.members:
        registration.register(
            management,
            name=member.name,
            namespace=MEMBER_NS,
            kubeconfig=Path(member.kubeconfig).read_bytes(),
            labels=LABELS[member.name],
        )
    kubeconfig = local_fleet.cluster(fleet.MANAGEMENT).kubeconfig
    thread = ControllerThread(kubeconfig, settings(bins.path("helm"), f"ov-{uuid.uuid4().hex[:4]}"))
    thread.start()
    try:
        yield
    finally:
        thread.stop()
        for mc in management.list(kinds.resource("MemberCluster"), namespace=MEMBER_NS):
            management.delete(kinds.resource("MemberCluster"), mc.metadata.name, namespace=MEMBER_NS)
    assert thread.error is None, thread.error


def labelling_override(name: str, placement: str, namespace: str, value: str) -> dict[str, Any]:
    """A ClusterResourceOverride labelling `namespace` (and so everything in it) `cluster-name: value`
    on the env=prod clusters of `placement`."""
    return {
        "apiVersion": API,
        "kind": "ClusterResourceOverride",
        "metadata": {"name": name},
        "spec": {
            "placement": {"name": placement},
            "clusterResourceSelectors": [
                {"group": "", "version": "v1", "kind": "Namespace", "name": namespace}
            ],
            "policy": {
                "overrideRules": [
                    {
                        "clusterSelector": PROD,
                        "jsonPatchOverrides": [
                            {"op": "add", "path": "/metadata/labels", "value": {"cluster-name": value}}
                        ],
                    }
                ]
            },
        },
    }


def apply(client: Client, doc: dict[str, Any]) -> None:
    client.apply(codecs.from_dict(doc), force=True)


def member_objects(client: Client, namespace: str) -> tuple[dict[str, str], dict[str, str]] | None:
    """(the namespace's labels, the ConfigMap's data) on a member, None until both are there."""
    try:
        ns = client.get(Namespace, namespace)
        cm = client.get(ConfigMap, "app-config", namespace=namespace)
    except ApiError as e:
        if e.status.code == 404:
            return None
        raise
    return dict(ns.metadata.labels or {}), dict(cm.data or {})


def statuses(management: Client, crp: str) -> dict[str, dict[str, Any]]:
    placed = management.get(kinds.resource("ClusterResourcePlacement"), crp)
    return {s["clusterName"]: s for s in (placed.status or {}).get("placementStatuses") or []}


def overridden(status: dict[str, Any]) -> dict[str, Any]:
    return next((c for c in status.get("conditions") or [] if c["type"] == "Overridden"), {})


def test_overrides_label_prod_clusters_and_replace_a_configmap_value_then_a_bad_one_fails_its_cluster(
    controller: None, management: Client, members: dict[str, Client]
) -> None:
    ns = f"ov-{uuid.uuid4().hex[:6]}"
    crp, cro = f"{ns}-crp", f"{ns}-cluster-name"
    management.create(Namespace(metadata=ObjectMeta(name=ns)))
    management.create(ConfigMap(metadata=ObjectMeta(name="app-config", namespace=ns), data={"level": "base"}))
    cluster_override = labelling_override(cro, crp, ns, "${MEMBER-CLUSTER-NAME}")

    def resource_override(path: str) -> dict[str, Any]:
        return {
            "apiVersion": API,
            "kind": "ResourceOverride",
            "metadata": {"name": "app-config", "namespace": ns},
            "spec": {
                "placement": {"name": crp},
                "resourceSelectors": [
                    {"group": "", "version": "v1", "kind": "ConfigMap", "name": "app-config"}
                ],
                "policy": {
                    "overrideRules": [
                        {
                            "clusterSelector": PROD,
                            "jsonPatchOverrides": [{"op": "replace", "path": path, "value": "production"}],
                        }
                    ]
                },
            },
        }

    apply(management, cluster_override)
    apply(management, resource_override("/data/level"))
    wait_for(
        lambda: _found(management, "ResourceOverrideSnapshot", "app-config-0", ns),
        what="the ResourceOverride snapshotted",
    )
    placement = {
        "apiVersion": API,
        "kind": "ClusterResourcePlacement",
        "metadata": {"name": crp},
        "spec": {
            "resourceSelectors": [{"group": "", "version": "v1", "kind": "Namespace", "name": ns}],
            "policy": {"placementType": "PickAll"},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 3}},
        },
    }
    apply(management, placement)
    try:
        expected = {
            "member-1": (None, {"level": "base"}),
            "member-2": ("member-2", {"level": "production"}),
            "member-3": ("member-3", {"level": "production"}),
        }

        def landed() -> bool:
            for name, (label, data) in expected.items():
                got = member_objects(members[name], ns)
                if got is None or (got[0].get("cluster-name"), got[1]) != (label, data):
                    return False
            return True

        wait_for(
            landed, what="overridden content on the members", explain=lambda: str(statuses(management, crp))
        )
        snap = management.get(kinds.resource("ClusterResourceOverrideSnapshot"), f"{cro}-0")
        assert (snap.metadata.labels or {})["kubernetes-fleet.io/parent-resource-override"] == cro
        assert (snap.metadata.labels or {})["kubernetes-fleet.io/is-latest-snapshot"] == "true"

        shown = wait_for(lambda: _all_shown(management, crp), what="per-cluster status")
        prod = shown["member-2"]
        assert prod["applicableClusterResourceOverrides"] == [f"{cro}-0"]
        assert prod["applicableResourceOverrides"] == [{"name": "app-config-0", "namespace": ns}]
        assert (overridden(prod)["status"], overridden(prod)["reason"]) == ("True", "OverriddenSucceeded")
        dev = shown["member-1"]
        assert "applicableResourceOverrides" not in dev
        assert (overridden(dev)["status"], overridden(dev)["reason"]) == ("True", "NoOverrideSpecified")

        # A path the ConfigMap does not have: the prod clusters fail, keep what they hold, and say why.
        apply(management, resource_override("/data/missing"))

        def failed() -> dict[str, dict[str, Any]] | None:
            now = statuses(management, crp)
            ok = all(
                overridden(now.get(m, {})).get("reason") == "OverriddenFailed"
                for m in ("member-2", "member-3")
            )
            return now if ok else None

        broken = wait_for(failed, what="Overridden=False on the prod clusters")
        message = overridden(broken["member-2"])["message"]
        assert (
            f"ResourceOverride snapshot {ns}/app-config-1, rule 0, patch 0 (replace /data/missing)" in message
        )
        assert overridden(broken["member-2"])["status"] == "False"
        assert overridden(broken["member-1"])["reason"] == "NoOverrideSpecified"
        for name, (label, data) in expected.items():  # nothing half-applied, nothing withdrawn
            got = member_objects(members[name], ns)
            assert got is not None
            assert (got[0].get("cluster-name"), got[1]) == (label, data)
    finally:
        management.delete(kinds.resource("ClusterResourcePlacement"), crp)
        wait_for(lambda: _found(management, "ClusterResourcePlacement", crp) is None, what="placement gone")
        management.delete(kinds.resource("ClusterResourceOverride"), cro)
        management.delete(kinds.resource("ResourceOverride"), "app-config", namespace=ns)
        wait_for(
            lambda: _found(management, "ClusterResourceOverrideSnapshot", f"{cro}-0") is None,
            what="the override's snapshots deleted with it",
        )
        management.delete(Namespace, ns)


def _all_shown(management: Client, crp: str) -> dict[str, dict[str, Any]] | None:
    now = statuses(management, crp)
    return now if set(now) == set(LABELS) and all(overridden(s) for s in now.values()) else None


def _found(client: Client, kind: str, name: str, namespace: str | None = None) -> Any | None:
    try:
        return client.get(kinds.resource(kind), name, namespace=namespace)
    except ApiError as e:
        if e.status.code == 404:
            return None
        raise


def test_a_staged_run_pins_the_override_snapshots_it_started_with(
    controller: None, management: Client, members: dict[str, Client]
) -> None:
    """Strategy External: an override's edit reaches members only through the next run, and each run
    lists, per cluster, the override snapshots it delivered."""
    ns = f"ovr-{uuid.uuid4().hex[:6]}"
    crp, cro, strategy = f"{ns}-crp", f"{ns}-label", f"{ns}-all"
    management.create(Namespace(metadata=ObjectMeta(name=ns)))
    management.create(ConfigMap(metadata=ObjectMeta(name="app-config", namespace=ns), data={"level": "base"}))

    def run(name: str) -> dict[str, Any]:
        spec = {"placementName": crp, "resourceSnapshotIndex": "0", "stagedRolloutStrategyName": strategy}
        return {"apiVersion": API, "kind": "ClusterStagedUpdateRun", "metadata": {"name": name}, "spec": spec}

    def succeeded(name: str) -> dict[str, Any] | None:
        found = _found(management, "ClusterStagedUpdateRun", name)
        status = dict((found.status or {}) if found is not None else {})
        done = any(c["type"] == "Succeeded" and c["status"] == "True" for c in status.get("conditions") or [])
        return status if done else None

    def pinned(status: dict[str, Any]) -> dict[str, list[Any]]:
        return {
            c["clusterName"]: list(c.get("clusterResourceOverrideSnapshots") or [])
            for stage in status.get("stagesStatus") or []
            for c in stage.get("clusters") or []
        }

    def label_on(member: str) -> str | None:
        got = member_objects(members[member], ns)
        return None if got is None else got[0].get("cluster-name")

    apply(management, labelling_override(cro, crp, ns, "${MEMBER-CLUSTER-NAME}"))
    wait_for(lambda: _found(management, "ClusterResourceOverrideSnapshot", f"{cro}-0"), what="snapshot 0")
    apply(
        management,
        {
            "apiVersion": API,
            "kind": "ClusterStagedUpdateStrategy",
            "metadata": {"name": strategy},
            "spec": {"stages": [{"name": "all", "labelSelector": {}, "maxConcurrency": 3}]},
        },
    )
    placement = {
        "apiVersion": API,
        "kind": "ClusterResourcePlacement",
        "metadata": {"name": crp},
        "spec": {
            "resourceSelectors": [{"group": "", "version": "v1", "kind": "Namespace", "name": ns}],
            "policy": {"placementType": "PickAll"},
            "strategy": {"type": "External"},
        },
    }
    apply(management, placement)
    try:
        wait_for(
            lambda: _found(management, "ClusterResourceSnapshot", f"{crp}-0-snapshot"),
            what="the resource snapshot",
        )
        apply(management, run(f"{ns}-run-1"))
        first = wait_for(lambda: succeeded(f"{ns}-run-1"), what="run 1")
        assert pinned(first) == {"member-1": [], "member-2": [f"{cro}-0"], "member-3": [f"{cro}-0"]}
        assert [label_on(m) for m in ("member-1", "member-2", "member-3")] == [None, "member-2", "member-3"]

        apply(management, labelling_override(cro, crp, ns, "edited-${MEMBER-CLUSTER-NAME}"))
        wait_for(lambda: _found(management, "ClusterResourceOverrideSnapshot", f"{cro}-1"), what="snapshot 1")
        # The placement does not roll on its own: members keep what run 1 delivered.
        assert label_on("member-2") == "member-2"
        apply(management, run(f"{ns}-run-2"))
        second = wait_for(lambda: succeeded(f"{ns}-run-2"), what="run 2")
        assert pinned(second)["member-2"] == [f"{cro}-1"]
        assert [label_on(m) for m in ("member-2", "member-3")] == ["edited-member-2", "edited-member-3"]
    finally:
        for kind, name in (
            ("ClusterStagedUpdateRun", f"{ns}-run-1"),
            ("ClusterStagedUpdateRun", f"{ns}-run-2"),
            ("ClusterResourcePlacement", crp),
            ("ClusterStagedUpdateStrategy", strategy),
            ("ClusterResourceOverride", cro),
        ):
            if _found(management, kind, name) is not None:
                management.delete(kinds.resource(kind), name)
        wait_for(lambda: _found(management, "ClusterResourcePlacement", crp) is None, what="placement gone")
        management.delete(Namespace, ns)


def _present(client: Client, kind: Any, name: str, namespace: str | None = None) -> bool:
    try:
        client.get(kind, name, namespace=namespace)
    except ApiError as e:
        if e.status.code == 404:
            return False
        raise
    return True


def _level(member: Client, namespace: str) -> str | None:
    got = member_objects(member, namespace)
    return None if got is None else got[1].get("level")


def test_selection_by_scope_and_label_a_delete_override_and_forced_server_side_apply_shape_members(
    controller: None, management: Client, members: dict[str, Client]
) -> None:
    """`selectionScope: NamespaceOnly` places the namespace without what is in it; a `labelSelector`
    places the namespaces carrying its labels, with their content; a ResourceOverride
    rule of `overrideType: Delete` keeps its object off the prod clusters; `ServerSideApply` with
    `serverSideApplyConfig.force: false` leaves a field another manager owns as a conflict, and
    `force: true` takes it over."""
    bare, full = f"ns-only-{uuid.uuid4().hex[:6]}", f"ns-full-{uuid.uuid4().hex[:6]}"
    crp, picked = f"{full}-crp", f"ns-picked-{uuid.uuid4().hex[:6]}"
    for ns in (bare, full):
        management.create(Namespace(metadata=ObjectMeta(name=ns)))
    management.create(Namespace(metadata=ObjectMeta(name=picked, labels={"fields-pick": picked})))
    management.create(ConfigMap(metadata=ObjectMeta(name="picked", namespace=picked), data={"x": "y"}))
    management.create(ConfigMap(metadata=ObjectMeta(name="inside", namespace=bare), data={"x": "y"}))
    management.create(
        ConfigMap(metadata=ObjectMeta(name="app-config", namespace=full), data={"level": "base"})
    )
    management.create(ConfigMap(metadata=ObjectMeta(name="drop-me", namespace=full), data={"x": "y"}))
    dev = members["member-1"]  # already holds full/app-config, its level owned by another manager
    dev.create(Namespace(metadata=ObjectMeta(name=full)))
    owned = ConfigMap(metadata=ObjectMeta(name="app-config", namespace=full), data={"level": "member-owned"})
    dev.apply(owned, field_manager="someone-else")
    apply(
        management,
        {
            "apiVersion": API,
            "kind": "ResourceOverride",
            "metadata": {"name": "drop", "namespace": full},
            "spec": {
                "placement": {"name": crp},
                "resourceSelectors": [{"group": "", "version": "v1", "kind": "ConfigMap", "name": "drop-me"}],
                "policy": {"overrideRules": [{"clusterSelector": PROD, "overrideType": "Delete"}]},
            },
        },
    )
    wait_for(
        lambda: _found(management, "ResourceOverrideSnapshot", "drop-0", full), what="the override snapshot"
    )
    selectors = [
        {"group": "", "version": "v1", "kind": "Namespace", "name": bare, "selectionScope": "NamespaceOnly"},
        {"group": "", "version": "v1", "kind": "Namespace", "name": full},
        {
            "group": "",
            "version": "v1",
            "kind": "Namespace",
            "labelSelector": {"matchLabels": {"fields-pick": picked}},
        },
    ]
    server_side: dict[str, Any] = {"type": "ServerSideApply", "serverSideApplyConfig": {"force": False}}
    strategy: dict[str, Any] = {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 3}}
    spec: dict[str, Any] = {
        "resourceSelectors": selectors,
        "policy": {"placementType": "PickAll"},
        "strategy": {**strategy, "applyStrategy": server_side},
    }
    placement: dict[str, Any] = {
        "apiVersion": API,
        "kind": "ClusterResourcePlacement",
        "metadata": {"name": crp},
        "spec": spec,
    }
    apply(management, placement)
    try:
        prod = [members["member-2"], members["member-3"]]
        wait_for(lambda: all(_level(m, full) == "base" for m in prod) or None, what="the content on prod")
        for member in members.values():
            assert _present(member, Namespace, bare)
            assert not _present(member, ConfigMap, "inside", bare)  # NamespaceOnly
            assert _present(member, ConfigMap, "picked", picked)  # by its namespace's label
        assert [_present(m, ConfigMap, "drop-me", full) for m in prod] == [False, False]  # Delete on prod
        wait_for(lambda: _present(dev, ConfigMap, "drop-me", full) or None, what="drop-me on dev")

        def conflict() -> str | None:
            status = management.get(kinds.resource("ClusterResourcePlacement"), crp).status or {}
            delivery = (status.get("deliveries") or {}).get(f"{MEMBER_NS}/member-1") or {}
            error = str(delivery.get("error") or "")
            return error if "app-config" in error else None

        wait_for(conflict, what="force: false leaves the other manager's field as a conflict")
        assert _level(dev, full) == "member-owned"
        forced = {**server_side, "serverSideApplyConfig": {"force": True}}
        placement["spec"] = {**spec, "strategy": {**strategy, "applyStrategy": forced}}
        apply(management, placement)
        wait_for(lambda: _level(dev, full) == "base" or None, what="force: true takes the field over")
    finally:
        management.delete(kinds.resource("ClusterResourcePlacement"), crp)
        wait_for(lambda: _found(management, "ClusterResourcePlacement", crp) is None, what="placement gone")
        management.delete(kinds.resource("ResourceOverride"), "drop", namespace=full)
        for ns in (bare, full, picked):
            management.delete(Namespace, ns)
        if _present(dev, Namespace, full):  # withdrawn with the placement, or still the member's own
            dev.delete(Namespace, full)


def test_revision_history_limit_keeps_only_the_newest_resource_snapshots(
    controller: None, management: Client, members: dict[str, Client]
) -> None:
    """`revisionHistoryLimit: 2`: each edit of the placed ConfigMap cuts a snapshot; only the two
    newest are kept, the latest delivered."""
    ns = f"hist-{uuid.uuid4().hex[:6]}"
    crp = f"{ns}-crp"
    management.create(Namespace(metadata=ObjectMeta(name=ns)))
    management.create(ConfigMap(metadata=ObjectMeta(name="app-config", namespace=ns), data={"level": "v0"}))
    placement = {
        "apiVersion": API,
        "kind": "ClusterResourcePlacement",
        "metadata": {"name": crp},
        "spec": {
            "resourceSelectors": [{"group": "", "version": "v1", "kind": "Namespace", "name": ns}],
            "policy": {"placementType": "PickAll"},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 3}},
            "revisionHistoryLimit": 2,
        },
    }
    apply(management, placement)

    def snapshots() -> list[str]:
        found = management.list(kinds.resource("ClusterResourceSnapshot"))
        return sorted(s.metadata.name for s in found if s.metadata.name.startswith(f"{crp}-"))

    try:
        for version in ("v1", "v2", "v3"):
            previous = f"v{int(version[1:]) - 1}"
            wait_for(
                lambda p=previous: all(_level(m, ns) == p for m in members.values()) or None,
                what=f"{previous} on every member",
            )
            management.patch(ConfigMap, "app-config", {"data": {"level": version}}, namespace=ns)
        wait_for(lambda: all(_level(m, ns) == "v3" for m in members.values()) or None, what="v3 delivered")
        kept = wait_for(lambda: s if len(s := snapshots()) == 2 else None, what="history trimmed to 2")
        assert kept == [f"{crp}-2-snapshot", f"{crp}-3-snapshot"]
    finally:
        management.delete(kinds.resource("ClusterResourcePlacement"), crp)
        wait_for(lambda: _found(management, "ClusterResourcePlacement", crp) is None, what="placement gone")
        management.delete(Namespace, ns)

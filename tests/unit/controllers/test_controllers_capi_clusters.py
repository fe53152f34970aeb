"""Cluster API clusters as Sveltos treats them (ADR 0109): members of the Sveltos family next to its
SveltosClusters, ready once their control plane is initialized (read as libsveltos reads it, in
v1beta1 and v1beta2), out of the fleet while being deleted, reached with `<name>-kubeconfig` (key
`value`) under the kubeconfig policy, and that Secret a credential, never content."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

import pytest

from fleetwave.api import families
from fleetwave.controllers import fanout
from fleetwave.controllers.fleet import capi, local_boundary, members
from fleetwave.controllers.shared.context import Cache
from fleetwave.controllers.sveltos import rollout_common, summary_writes
from fleetwave.controllers.sveltos import summary_status as ss
from fleetwave.translate import KEY_LABEL, KIND_LABEL

TOKEN = "tok-5c1e-never-shown"
SVELTOS_CONFIG = "config.projectsveltos.io/v1beta1"


def _kubeconfig(server: str = "https://10.0.0.7:6443", user: dict[str, Any] | None = None) -> bytes:
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "c", "cluster": {"server": server}}],
            "users": [{"name": "u", "user": user or {"token": TOKEN}}],
            "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
            "current-context": "x",
        }
    ).encode()


def _capi_secret(name: str, kubeconfig: bytes, namespace: str = "dev") -> dict[str, Any]:
    """The Secret Cluster API writes for a cluster: `<name>-kubeconfig`, key `value`, its type."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": f"{name}-kubeconfig", "namespace": namespace},
        "type": capi.SECRET_TYPE,
        "data": {"value": base64.b64encode(kubeconfig).decode()},
    }


def _cluster(
    name: str = "c1",
    namespace: str = "dev",
    status: dict[str, Any] | None = None,
    labels: dict[str, str] | None = None,
    **meta: Any,
) -> dict[str, Any]:
    return {
        "apiVersion": "cluster.x-k8s.io/v1beta2",
        "kind": "Cluster",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {"env": "dev"}, **meta},
        "spec": {},
        "status": status if status is not None else {"initialization": {"controlPlaneInitialized": True}},
    }


def _sveltos_cluster(name: str = "c1", namespace: str = "dev") -> dict[str, Any]:
    return {
        "apiVersion": "lib.projectsveltos.io/v1beta1",
        "kind": "SveltosCluster",
        "metadata": {"name": name, "namespace": namespace, "labels": {"env": "dev"}},
        "spec": {},
        "status": {"ready": True},
    }


class _Informer:
    """What the cache reads of an informer: a store of dicts by key, a revision, handlers."""

    def __init__(self, *objects: dict[str, Any]) -> None:
        self.store = {f"{o['metadata']['namespace']}/{o['metadata']['name']}": o for o in objects}
        self.revision = 1

    def get(self, key: str) -> Any:
        return self.store.get(key)

    def on_change(self, handler: Callable[[str, Any], None]) -> None:
        pass


def _cache(
    family: families.Family,
    *,
    sveltos: tuple[dict[str, Any], ...] = (),
    capi_clusters: tuple[dict[str, Any], ...] | None = (),
    secrets: tuple[dict[str, Any], ...] = (),
) -> Cache:
    informers: dict[str, Any] = {"MemberCluster": _Informer(*sveltos), "Secret": _Informer(*secrets)}
    if capi_clusters is not None:
        informers[members.CAPI_CACHE_KIND] = _Informer(*capi_clusters)
    return Cache(informers, family)


@pytest.mark.parametrize(
    "status",
    [
        {"initialization": {"controlPlaneInitialized": True}},  # v1beta2
        {"conditions": [{"type": "ControlPlaneInitialized", "status": "True"}]},  # v1beta2 (and v1beta1)
        {"controlPlaneReady": True},  # v1beta1
        {
            "v1beta2": {"conditions": [{"type": "ControlPlaneInitialized", "status": "True"}]}
        },  # CAPI 1.9, 1.10
    ],
)
def test_a_cluster_whose_control_plane_is_initialized_is_ready_in_either_version(
    status: dict[str, Any],
) -> None:
    member = members.from_capi(_cluster(status=status))
    assert (member.ready, member.deleting, member.failure_message) == (True, False, "")
    assert member.key == "capi:dev/c1"
    assert member.secret == ("dev", "c1-kubeconfig", "value")


def test_a_provisioning_cluster_waits_and_says_why_in_cluster_apis_words() -> None:
    said = "Waiting for KubeadmControlPlane to report initialized " + "x" * 1000
    status = {
        "phase": "Provisioning",
        "initialization": {"controlPlaneInitialized": False},
        "conditions": [{"type": "ControlPlaneInitialized", "status": "False", "message": said}],
    }
    fleet = members.fleet([members.from_capi(_cluster(status=status))], registered_kind="SveltosCluster")
    cluster = fleet.by_name["capi:dev/c1"]
    assert not cluster.ready
    assert cluster.why.startswith(
        "the Cluster API cluster is provisioning: its control plane is not initialized"
    )
    assert "Waiting for KubeadmControlPlane" in cluster.why
    assert len(cluster.why) < 400  # Cluster API's message is bounded
    assert not members.from_capi(_cluster(status={})).ready  # no status yet: provisioning


@pytest.mark.parametrize(
    ("meta", "status"),
    [
        (
            {"deletionTimestamp": "2026-11-29T00:00:00Z"},
            {"initialization": {"controlPlaneInitialized": True}},
        ),
        ({}, {"phase": "Deleting", "initialization": {"controlPlaneInitialized": True}}),
    ],
)
def test_a_cluster_being_deleted_leaves_the_fleet(meta: dict[str, Any], status: dict[str, Any]) -> None:
    deleting = members.from_capi(_cluster("gone", status=status, **meta))
    staying = members.from_capi(_cluster("stays"))
    assert deleting.deleting
    assert members.fleet([deleting, staying]).names == {"capi:dev/stays"}


def test_a_paused_cluster_keeps_its_place_but_is_not_delivered_to() -> None:
    paused = _cluster()
    paused["spec"] = {"paused": True}
    cluster = members.fleet([members.from_capi(paused)]).by_name["capi:dev/c1"]
    assert (cluster.ready, cluster.why) == (False, "paused")


def test_the_sveltos_family_has_cluster_api_clusters_next_to_sveltos_clusters_of_the_same_name() -> None:
    cache = _cache(families.SVELTOS, sveltos=(_sveltos_cluster(),), capi_clusters=(_cluster(),))
    fleet = rollout_common.fleet_of(cache)
    assert fleet.names == {"dev/c1", "capi:dev/c1"}
    assert fleet.by_name["dev/c1"].labels[KIND_LABEL] == "SveltosCluster"
    assert fleet.by_name["capi:dev/c1"].labels[KIND_LABEL] == "Cluster"
    assert fleet.by_name["capi:dev/c1"].labels[KEY_LABEL] == "capi:dev/c1"
    assert fleet.by_name["capi:dev/c1"].labels["env"] == "dev"  # the Cluster's own labels


def test_other_families_and_a_controller_without_the_informer_have_no_cluster_api_clusters() -> None:
    native = _cache(families.NATIVE, sveltos=(_sveltos_cluster(),), capi_clusters=(_cluster(),))
    assert rollout_common.fleet_of(native).names == {"dev/c1"}
    assert members.lookup(native, "capi:dev/c1", with_capi=members.with_capi(native)) is None
    unwatched = _cache(families.SVELTOS, sveltos=(_sveltos_cluster(),), capi_clusters=None)
    assert rollout_common.fleet_of(unwatched).names == {"dev/c1"}
    assert members.target_for(unwatched, "capi:dev/c1", with_capi=members.with_capi(unwatched)) is None


def test_a_cluster_api_cluster_is_reached_with_its_own_kubeconfig_under_the_policy() -> None:
    good = _capi_secret("c1", _kubeconfig())
    decoy = {
        **_capi_secret("c1", _kubeconfig("https://10.9.9.9:6443")),
        "metadata": {"name": "c1-sveltos-kubeconfig", "namespace": "dev"},
    }
    cache = _cache(families.SVELTOS, sveltos=(), capi_clusters=(_cluster(),), secrets=(good, decoy))
    target = members.target_for(cache, "capi:dev/c1", with_capi=True)
    assert target is not None
    assert target.name == "capi:dev/c1"
    assert b"10.0.0.7" in target.kubeconfig
    # A SveltosCluster of the same name is another cluster, with another Secret.
    assert members.target_for(cache, "dev/c1", with_capi=True) is None


@pytest.mark.parametrize(
    ("kubeconfig", "reason"),
    [
        (_kubeconfig(user={"exec": {"command": "/bin/sh"}}), "user.exec runs a program"),
        (_kubeconfig("http://10.0.0.7:6443"), "http://"),
    ],
)
def test_a_kubeconfig_the_policy_refuses_is_not_used_and_says_why_without_its_content(
    kubeconfig: bytes, reason: str
) -> None:
    cache = _cache(families.SVELTOS, capi_clusters=(_cluster(),), secrets=(_capi_secret("c1", kubeconfig),))
    member = members.lookup(cache, "capi:dev/c1", with_capi=True)
    assert member is not None
    found = members.credentials(cache, member)
    assert (found.kubeconfig, found.reason) == (None, members.KUBECONFIG_REFUSED)
    assert reason in found.message
    assert "dev/c1-kubeconfig" in found.message
    assert TOKEN not in found.message
    assert members.target_for(cache, "capi:dev/c1", with_capi=True) is None


def test_a_cluster_api_kubeconfig_is_a_credential_never_content() -> None:
    secret = _capi_secret("c1", _kubeconfig())
    cache = _cache(families.SVELTOS, capi_clusters=(_cluster(),), secrets=(secret,))
    assert ("dev", "c1-kubeconfig") in members.credential_secrets(cache)
    # Named by its Cluster, or of Cluster API's type whatever it is called (its CA and keys too).
    untyped = {**secret, "type": "Opaque"}
    assert members.is_kubeconfig_secret(untyped, members.credential_secrets(cache))
    ca = {**secret, "metadata": {"name": "c1-ca", "namespace": "dev"}}
    assert members.is_kubeconfig_secret(ca, frozenset())
    problem = local_boundary.problem(ca, controller_namespace="fleetwave-system")
    assert problem is not None
    assert capi.SECRET_TYPE in problem


def test_a_summary_of_a_cluster_api_cluster_is_named_typed_and_labelled_as_sveltos_does() -> None:
    assert ss.summary_name("web", "c1", ss.CAPI_TYPE) == "web-capi-c1"
    assert ss.summary_name("web", "c1") == "web-sveltos-c1"
    spec = {"clusterNamespace": "dev", "clusterName": "c1", "clusterType": "Capi"}
    assert ss.cluster_of(spec) == "capi:dev/c1"
    assert ss.cluster_of({**spec, "clusterType": "Sveltos"}) == "dev/c1"
    body = _body("capi:dev/c1")
    assert body["metadata"]["name"] == "web-capi-c1"
    assert body["metadata"]["namespace"] == "dev"
    assert body["spec"]["clusterType"] == "Capi"
    labels = body["metadata"]["labels"]
    assert labels["projectsveltos.io/cluster-type"] == "Capi"
    assert labels["projectsveltos.io/cluster-name"] == "c1"
    sveltos = _body("dev/c1")
    assert (sveltos["metadata"]["name"], sveltos["spec"]["clusterType"]) == ("web-sveltos-c1", "Sveltos")


def test_a_summary_whose_name_is_not_its_cluster_types_is_not_ours() -> None:
    body = _body("capi:dev/c1")
    assert ss.foreign(body, owner_api_version=SVELTOS_CONFIG) == ""
    posing = {**body, "spec": {**body["spec"], "clusterType": "Sveltos"}}
    assert "its name is not the one fleetwave gives" in ss.foreign(posing, owner_api_version=SVELTOS_CONFIG)


def _body(cluster: str) -> dict[str, Any]:
    shared = summary_writes.Shared(
        profile="web",
        api_version="config.projectsveltos.io/v1beta1",
        annotations={},
        owner_reference={
            "apiVersion": "config.projectsveltos.io/v1beta1",
            "kind": "ClusterProfile",
            "name": "web",
            "controller": True,
        },
        profile_spec={},
        digest="d",
    )
    return shared.body(cluster)


class _Meta:
    def __init__(self, raw: dict[str, Any]) -> None:
        self.namespace = raw["metadata"]["namespace"]
        self.name = raw["metadata"]["name"]
        self.annotations = raw["metadata"].get("annotations")
        self.labels = raw["metadata"].get("labels")


class _Obj:
    def __init__(self, raw: dict[str, Any]) -> None:
        self.raw, self.metadata, self.spec = raw, _Meta(raw), raw.get("spec")

    def to_dict(self) -> dict[str, Any]:
        return self.raw


def test_summaries_are_indexed_by_their_cluster_of_either_kind() -> None:
    index = fanout.SummaryIndex()
    index.on_change("ADDED", _Obj(_body("capi:dev/c1")))
    index.on_change("ADDED", _Obj(_body("dev/c1")))
    assert index.of_member("capi:dev/c1") == ["dev/web-capi-c1"]
    assert index.of_member("dev/c1") == ["dev/web-sveltos-c1"]


def test_only_what_makes_a_cluster_api_cluster_ready_or_selectable_wakes_the_rollouts() -> None:
    changes = fanout.MemberChanges(families.SVELTOS, capi=True)
    provisioning = _cluster(status={"phase": "Provisioning"})
    assert changes.observe("ADDED", _Obj(provisioning))
    noisy = _cluster(status={"phase": "Provisioning", "observedGeneration": 7})
    assert not changes.observe("MODIFIED", _Obj(noisy))  # status rewritten, nothing rollouts read
    assert changes.observe("MODIFIED", _Obj(_cluster(status={"controlPlaneReady": True})))
    assert changes.observe("MODIFIED", _Obj(_cluster(labels={"env": "prod"})))
    assert changes.names("dev", "c1-kubeconfig") == {"capi:dev/c1"}
    assert changes.is_kubeconfig(_Obj(_capi_secret("c1", b"")))


def test_registered_members_are_built_once_per_state_and_follow_a_change() -> None:
    """A placement's pass reads every member: they are built once per state of the MemberClusters
    (the informer's revision), and a change shows once the informer has it."""
    informer = _Informer(_sveltos_cluster("a"), _sveltos_cluster("b"))
    cache = Cache({"MemberCluster": informer}, families.NATIVE)
    first = members.registered(cache)
    assert [m.key for m in first] == ["dev/a", "dev/b"]
    assert members.registered(cache) is first  # nothing changed: not built again

    relabelled = _sveltos_cluster("a")
    relabelled["metadata"]["labels"] = {"env": "prod"}
    informer.store["dev/a"] = relabelled
    informer.revision += 1
    changed = members.registered(cache)
    assert {m.key: m.labels["env"] for m in changed} == {"dev/a": "prod", "dev/b": "dev"}
    assert [m.key for m in members.of_family(cache)] == ["dev/a", "dev/b"]

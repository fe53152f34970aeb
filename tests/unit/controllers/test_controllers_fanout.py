"""Event fan-out scales with what an event concerns (issue 11): a ConfigMap or Secret wakes the rollouts
that name it, a member wakes the rollouts only when what they read of it changed, and a member's
summaries are looked up, not scanned for. The wiring of `app` runs over stand-in informers here."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from fleetwave.controllers import fanout, watches
from fleetwave.controllers.fleet import members
from fleetwave.controllers.shared.context import Cache
from fleetwave.controllers.shared.echoes import Echoes
from fleetwave.controllers.shared.keys import SummaryKey
from fleetwave.controllers.shared.own_writes import OwnWrites
from fleetwave.controllers.shared.wakeups import Wakeups
from fleetwave.controllers.sveltos import rollout_common as common
from fleetwave.controllers.sveltos import summary_status as ss
from fleetwave.runtime.controller import Controller, Result
from fleetwave.runtime.watching import EventType, object_key

NS = "fleetwave-system"
API = "fleetwave.io/v1alpha1"


class _Obj:
    """A cached object as the informers hold it: attribute metadata/spec, `to_dict()`."""

    def __init__(self, body: dict[str, Any]) -> None:
        self._body = body
        meta = {
            "namespace": None,
            "labels": None,
            "annotations": None,
            "resourceVersion": None,
            **body["metadata"],
        }
        self.metadata = SimpleNamespace(**meta)
        self.spec = body.get("spec")

    def to_dict(self) -> dict[str, Any]:
        return self._body


class _Informer:
    """The part of `Informer` the wiring uses: a store, handlers in registration order, and `emit`."""

    def __init__(self) -> None:
        self.store: dict[str, Any] = {}
        self._handlers: list[Any] = []

    def get(self, key: str) -> Any | None:
        return self.store.get(key)

    def on_change(self, handler: Any) -> None:
        self._handlers.append(handler)

    def emit(self, event: EventType, obj: _Obj) -> None:
        if event == "DELETED":
            self.store.pop(object_key(obj), None)
        else:
            self.store[object_key(obj)] = obj
        for handler in self._handlers:
            handler(event, obj)


class _Unscannable(dict[str, Any]):
    """A store that can be kept up to date but fails any test that lists it: lookups must go
    through the indexes."""

    def _scanned(self, *_args: Any) -> Any:
        raise AssertionError("the store was scanned")

    __iter__ = values = items = keys = __len__ = _scanned


async def _never(_key: str) -> Result:
    raise AssertionError("no reconcile runs in these tests")


class _Recorder(Controller[str]):
    """A controller that records what it is asked to enqueue."""

    def __init__(self, name: str) -> None:
        super().__init__(name, _never)
        self.woken: set[str] = set()
        self.delays: dict[str, float] = {}

    def enqueue(self, key: str, delay: float = 0.0, *, urgent: bool = False) -> None:
        self.woken.add(key)
        self.delays[key] = delay


KINDS = (
    "ConfigMap",
    "Secret",
    "ClusterPromotion",
    "ClusterProfile",
    "ClusterSummary",
    "MemberCluster",
    "ClusterSet",
    "Set",
)


@dataclass
class World:
    informers: dict[str, _Informer] = field(default_factory=lambda: {k: _Informer() for k in KINDS})
    promotions: _Recorder = field(default_factory=lambda: _Recorder("promotions"))
    profiles: _Recorder = field(default_factory=lambda: _Recorder("profiles"))
    summaries: _Recorder = field(default_factory=lambda: _Recorder("summaries"))
    own: OwnWrites = field(default_factory=OwnWrites)
    echoes: Echoes = field(default_factory=Echoes)
    wakeups: Wakeups = field(default_factory=Wakeups)
    sets: dict[str, _Recorder] = field(
        default_factory=lambda: {"ClusterSet": _Recorder("clustersets"), "Set": _Recorder("sets")}
    )

    def __post_init__(self) -> None:
        self.keys = watches.Keys(Cache(self.informers))  # type: ignore[arg-type]
        writes = watches.Writes(self.own, self.echoes, self.wakeups)
        watches.wire(
            self.keys,
            self.informers,  # type: ignore[arg-type]
            self.promotions,
            self.profiles,
            self.summaries,
            writes,
            sets=self.sets,  # type: ignore[arg-type]
        )

    def emit(self, event: EventType, kind: str, body: dict[str, Any]) -> _Obj:
        obj = _Obj(body)
        self.informers[kind].emit(event, obj)
        return obj

    def woken(self) -> tuple[set[str], set[str], set[str]]:
        """(promotions, profiles, summaries) woken since the last call."""
        out = (self.promotions.woken, self.profiles.woken, self.summaries.woken)
        self.promotions.woken, self.profiles.woken, self.summaries.woken = set(), set(), set()
        return out


NOTHING: tuple[set[str], set[str], set[str]] = (set(), set(), set())


def _ref(name: str, namespace: str | None = "apps", kind: str = "ConfigMap") -> dict[str, Any]:
    return {"kind": kind, "name": name, **({"namespace": namespace} if namespace else {})}


def _profile(name: str, spec: dict[str, Any], annotations: dict[str, str] | None = None) -> dict[str, Any]:
    metadata = {"name": name, "annotations": annotations or {}, "labels": {}}
    return {"apiVersion": API, "kind": "ClusterProfile", "metadata": metadata, "spec": spec}


def _promotion(
    name: str, profile_spec: dict[str, Any], trigger: dict[str, Any] | None = None
) -> dict[str, Any]:
    stages = [{"name": "dev", "trigger": trigger or {"auto": {}}}]
    spec = {"profileSpec": profile_spec, "stages": stages}
    return {"apiVersion": API, "kind": "ClusterPromotion", "metadata": {"name": name}, "spec": spec}


def _configmap(name: str, namespace: str = "apps") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace}, "data": {}}


def _secret(name: str, namespace: str = "apps", labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace, "labels": labels or {}}, "data": {}}


def _member(
    name: str,
    namespace: str = "fleet",
    labels: dict[str, str] | None = None,
    status: dict[str, Any] | None = None,
    secret: str | None = None,
) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "MemberCluster",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}, "annotations": {}},
        "spec": {"kubeconfigSecretRef": {"name": secret or f"{name}-kubeconfig"}},
        "status": status or {},
    }


def _summary(
    name: str, member: str, *, namespace: str = "fleet", profile: str = "p", content: str = ""
) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "ClusterSummary",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {ss.PROFILE_LABEL: profile},
            "annotations": {ss.CONTENT_ANNOTATION: content or "fw-content-0"},
        },
        "spec": {"clusterNamespace": namespace, "clusterName": member},
    }


@pytest.fixture
def world() -> World:
    w = World()
    w.emit("ADDED", "ClusterProfile", _profile("p-web", {"policyRefs": [_ref("web")]}))
    w.emit("ADDED", "ClusterProfile", _profile("p-db", {"policyRefs": [_ref("db")]}))
    w.emit("ADDED", "ClusterPromotion", _promotion("promo-web", {"policyRefs": [_ref("web")]}))
    w.emit("ADDED", "ClusterPromotion", _promotion("promo-cache", {"policyRefs": [_ref("cache")]}))
    w.woken()
    return w


# ---- ConfigMaps and Secrets ----


def test_a_configmap_no_rollout_names_wakes_nothing(world: World) -> None:
    world.emit("ADDED", "ConfigMap", _configmap("unrelated"))
    world.emit("MODIFIED", "ConfigMap", _configmap("web", namespace="elsewhere"))  # same name, other place
    world.emit("MODIFIED", "Secret", _secret("web"))  # same name, other kind
    assert world.woken() == NOTHING


def test_a_configmap_a_profile_names_wakes_that_profile_only(world: World) -> None:
    world.emit("MODIFIED", "ConfigMap", _configmap("db"))
    assert world.woken() == (set(), {"p-db"}, set())


def test_a_configmap_a_promotions_profile_spec_names_wakes_that_promotion_only(world: World) -> None:
    world.emit("MODIFIED", "ConfigMap", _configmap("web"))
    assert world.woken() == ({"promo-web"}, {"p-web"}, set())
    world.emit("DELETED", "ConfigMap", _configmap("cache"))
    assert world.woken() == ({"promo-cache"}, set(), set())


def test_helm_values_and_pre_health_check_refs_are_indexed_and_a_default_namespace_matches_any() -> None:
    world = World()
    chart = {"repositoryURL": "https://charts", "releaseName": "r", "releaseNamespace": "r"}
    values = {"helmCharts": [{**chart, "valuesFrom": [{"kind": "Secret", "name": "vals"}]}]}
    world.emit("ADDED", "ClusterProfile", _profile("p-helm", values))
    trigger = {"manual": {"preHealthCheckDeployment": [_ref("pre", namespace="checks")]}}
    world.emit("ADDED", "ClusterPromotion", _promotion("promo", {}, trigger))
    world.woken()
    world.emit("MODIFIED", "Secret", _secret("vals", namespace="anywhere"))
    assert world.woken() == (set(), {"p-helm"}, set())
    world.emit("MODIFIED", "ConfigMap", _configmap("pre", namespace="checks"))
    assert world.woken() == ({"promo"}, set(), set())


def test_an_edited_profile_is_woken_by_what_it_names_now(world: World) -> None:
    world.emit("MODIFIED", "ClusterProfile", _profile("p-web", {"policyRefs": [_ref("api")]}))
    world.woken()
    world.emit("MODIFIED", "ConfigMap", _configmap("web"))
    assert world.woken() == ({"promo-web"}, set(), set())
    world.emit("MODIFIED", "ConfigMap", _configmap("api"))
    assert world.woken() == (set(), {"p-web"}, set())
    world.emit("DELETED", "ClusterProfile", _profile("p-web", {"policyRefs": [_ref("api")]}))
    world.woken()
    world.emit("MODIFIED", "ConfigMap", _configmap("api"))
    assert world.woken() == NOTHING


def test_a_stage_profile_is_woken_by_its_pinned_snapshot_not_by_the_refs_it_copies(world: World) -> None:
    snapshot = "fw-content-" + "a" * 40
    pinned = {common.PINNED_ANNOTATION: snapshot}
    world.emit("ADDED", "ClusterProfile", _profile("promo-web-dev", {"policyRefs": [_ref("web")]}, pinned))
    world.woken()
    world.emit("MODIFIED", "ConfigMap", _configmap("web"))
    assert world.woken() == ({"promo-web"}, {"p-web"}, set())
    world.emit("ADDED", "ConfigMap", _configmap(snapshot, namespace=NS))
    assert world.woken() == (set(), {"promo-web-dev"}, set())  # no promotion: snapshots name none


def test_a_snapshot_wakes_the_summaries_delivering_it_and_their_profiles_whatever_its_kind() -> None:
    world = World()
    secret_snapshot = "fw-content-s-" + "b" * 40
    world.emit("ADDED", "ClusterSummary", _summary("s1", "m1", profile="p", content=secret_snapshot))
    world.emit("ADDED", "ClusterSummary", _summary("s2", "m2", profile="q"))
    world.woken()
    world.emit("ADDED", "Secret", _secret(secret_snapshot, namespace=NS))
    assert world.woken() == (set(), {"p"}, {"fleet/s1"})


def test_a_spec_that_does_not_parse_reads_nothing_and_one_not_understood_is_woken_by_everything() -> None:
    world = World()
    world.emit("ADDED", "ClusterProfile", _profile("broken", {"policyRefs": "not a list"}))
    world.emit("MODIFIED", "ConfigMap", _configmap("web"))
    assert world.woken()[1] == {"broken"}  # its own event only
    world.emit("MODIFIED", "ConfigMap", _configmap("web"))
    assert world.woken() == NOTHING

    def baffling(_raw: Mapping[str, Any]) -> frozenset[fanout.Source]:
        raise RuntimeError("a spec shape nobody foresaw")

    index = fanout.ReadIndex(baffling)
    index.on_change("ADDED", _Obj(_profile("odd", {})))
    assert index.readers("Secret", "any", "thing") == {"odd"}
    index.on_change("DELETED", _Obj(_profile("odd", {})))
    assert index.readers("Secret", "any", "thing") == set()


# ---- members ----


def test_a_member_status_only_change_wakes_no_rollout_but_a_label_change_does(world: World) -> None:
    world.emit("ADDED", "ClusterSummary", _summary("s1", "m1", profile="p-web"))
    world.emit("ADDED", "MemberCluster", _member("m1", labels={"env": "dev"}, status={"ready": True}))
    everything = ({"promo-web", "promo-cache"}, {"p-web", "p-db"})
    assert world.woken()[:2] == everything
    probed = {
        "ready": True,
        "version": "v1.31",
        "conditions": [{"type": "Ready", "reason": "APIServerReady"}],
    }
    world.emit("MODIFIED", "MemberCluster", _member("m1", labels={"env": "dev"}, status=probed))
    assert world.woken() == (set(), set(), {"fleet/s1"})  # its summaries still hear of it, as before
    world.emit("MODIFIED", "MemberCluster", _member("m1", labels={"env": "prod"}, status=probed))
    assert world.woken()[:2] == everything


def test_member_readiness_spec_and_deletion_wake_the_rollouts(world: World) -> None:
    everything = ({"promo-web", "promo-cache"}, {"p-web", "p-db"})
    world.emit("ADDED", "MemberCluster", _member("m1", status={"ready": True}))
    world.woken()
    world.emit("MODIFIED", "MemberCluster", _member("m1", status={"ready": False}))
    assert world.woken()[:2] == everything
    world.emit("MODIFIED", "MemberCluster", _member("m1", status={"ready": False}, secret="other"))
    assert world.woken()[:2] == everything
    world.emit("DELETED", "MemberCluster", _member("m1", status={"ready": False}, secret="other"))
    assert world.woken()[:2] == everything


def _cluster_set(name: str, chosen: list[str], max_replicas: int = 1) -> dict[str, Any]:
    refs = [{"namespace": "fleet", "name": c} for c in chosen]
    return {
        "apiVersion": API,
        "kind": "ClusterSet",
        "metadata": {"name": name},
        "spec": {"clusterSelector": {"matchLabels": {"env": "prod"}}, "maxReplicas": max_replicas},
        "status": {"selectedClusterRefs": refs},
    }


def test_a_cluster_sets_new_choice_wakes_the_profiles_naming_it_and_no_other(world: World) -> None:
    """ADR 0108: a profile follows what the ClusterSets in its setRefs chose, not their other edits."""
    world.emit("ADDED", "ClusterProfile", _profile("p-set", {"setRefs": ["prod", "edge"]}))
    world.woken()
    world.emit("ADDED", "ClusterSet", _cluster_set("prod", ["m1"]))
    assert world.woken() == (set(), {"p-set"}, set())
    world.emit("MODIFIED", "ClusterSet", _cluster_set("prod", ["m1"], max_replicas=2))
    assert world.woken() == NOTHING  # its spec changed, not its choice: the set's own pass follows
    world.emit("MODIFIED", "ClusterSet", _cluster_set("prod", ["m2"]))
    assert world.woken() == (set(), {"p-set"}, set())
    world.emit("ADDED", "ClusterSet", _cluster_set("unnamed", ["m1"]))
    assert world.woken() == NOTHING
    world.emit("DELETED", "ClusterSet", _cluster_set("prod", ["m2"]))
    assert world.woken() == (set(), {"p-set"}, set())


def test_a_set_follows_its_own_changes_and_every_member_change_it_reads(world: World) -> None:
    world.emit("ADDED", "ClusterSet", _cluster_set("prod", []))
    namespaced = {**_cluster_set("team-set", []), "kind": "Set"}
    namespaced["metadata"] = {"name": "team-set", "namespace": "team"}
    world.emit("ADDED", "Set", namespaced)
    assert (world.sets["ClusterSet"].woken, world.sets["Set"].woken) == ({"prod"}, {"team/team-set"})
    for recorder in world.sets.values():
        recorder.woken = set()
    world.emit("ADDED", "MemberCluster", _member("m1", status={"ready": True}))
    assert (world.sets["ClusterSet"].woken, world.sets["Set"].woken) == ({"prod"}, {"team/team-set"})
    for recorder in world.sets.values():
        recorder.woken = set()
    world.emit("MODIFIED", "MemberCluster", _member("m1", status={"ready": True, "version": "v1.31"}))
    assert not world.sets["ClusterSet"].woken  # nothing a set reads changed
    world.emit("MODIFIED", "MemberCluster", _member("m1", status={"ready": False, "version": "v1.31"}))
    assert world.sets["ClusterSet"].woken == {"prod"}


def test_summaries_of_a_member_are_looked_up_not_scanned() -> None:
    world = World()
    world.emit("ADDED", "ClusterSummary", _summary("p-m1", "m1"))
    world.emit("ADDED", "ClusterSummary", _summary("q-m1", "m1", profile="q"))
    world.emit("ADDED", "ClusterSummary", _summary("p-m2", "m2"))
    world.emit("ADDED", "ClusterSummary", _summary("p-m1-other", "m1", namespace="other"))
    world.emit("MODIFIED", "ClusterSummary", _summary("q-m1", "m1", profile="q"))  # no duplicate
    world.informers["ClusterSummary"].store = _Unscannable()
    m1 = _Obj(_member("m1"))
    assert list(world.keys.summaries_of_member(m1)) == ["fleet/p-m1", "fleet/q-m1"]
    world.emit("DELETED", "ClusterSummary", _summary("p-m1", "m1"))
    assert list(world.keys.summaries_of_member(m1)) == ["fleet/q-m1"]
    world.emit("MODIFIED", "ClusterSummary", _summary("q-m1", "m2", profile="q"))  # moved to another member
    assert list(world.keys.summaries_of_member(m1)) == []
    assert list(world.keys.summaries_of_member(_Obj(_member("m2")))) == ["fleet/p-m2", "fleet/q-m1"]


def test_a_kubeconfig_secret_wakes_its_members_summaries_and_the_promotions_not_the_profiles(
    world: World,
) -> None:
    world.emit("ADDED", "ClusterSummary", _summary("s1", "m1", profile="p-web"))
    world.emit("ADDED", "ClusterSummary", _summary("s2", "m2", profile="p-web"))
    world.emit("ADDED", "MemberCluster", _member("m2", secret="m2-creds"))
    world.woken()
    labelled = _secret("m1-kubeconfig", namespace="fleet", labels={members.SECRET_LABEL: "m1"})
    world.emit("MODIFIED", "Secret", labelled)
    assert world.woken() == ({"promo-web", "promo-cache"}, set(), {"fleet/s1"})
    world.emit("MODIFIED", "Secret", _secret("m2-creds", namespace="fleet"))  # named by m2, unlabelled
    assert world.woken() == ({"promo-web", "promo-cache"}, set(), {"fleet/s2"})
    world.emit("MODIFIED", "Secret", _secret("tls-cert", namespace="fleet"))
    assert world.woken() == NOTHING


def test_a_stage_profiles_status_wakes_its_promotion_only_when_it_turns_invalid() -> None:
    w = World()

    def stage(status: dict[str, Any], generation: int = 1) -> dict[str, Any]:
        body = _profile("web-dev", {"policyRefs": [_ref("web")]})
        body["metadata"].update(labels={"fleetwave.io/promotion": "web"}, generation=generation, uid="u")
        return {**body, "status": status}

    ready = {"type": "Ready", "status": "True", "reason": "Provisioned", "message": "1 of 3 provisioned"}
    w.emit("ADDED", "ClusterProfile", stage({"conditions": [ready]}))
    assert w.woken()[0] == {"web"}
    w.emit("MODIFIED", "ClusterProfile", stage({"conditions": [{**ready, "message": "3 of 3"}], "n": 3}))
    assert w.woken()[0] == set()  # progress the promotion reads from the summaries itself
    provisioning = {**ready, "status": "False", "reason": "Provisioning"}
    w.emit("MODIFIED", "ClusterProfile", stage({"conditions": [provisioning]}))
    assert w.woken()[0] == set()  # so is its verdict on them
    invalid = {"type": "Ready", "status": "False", "reason": "InvalidSpec", "message": "snapshot gone"}
    w.emit("MODIFIED", "ClusterProfile", stage({"conditions": [invalid]}))
    assert w.woken()[0] == {"web"}
    w.emit("MODIFIED", "ClusterProfile", stage({"conditions": [invalid]}, generation=2))
    assert w.woken()[0] == {"web"}
    w.emit("MODIFIED", "ClusterProfile", stage({"conditions": [ready]}, generation=2))
    assert w.woken()[0] == {"web"}  # valid again


@pytest.mark.parametrize(
    ("kind", "name", "woken"), [("ClusterPromotion", "web", 0), ("ClusterProfile", "web-dev", 1)]
)
def test_a_rollouts_own_status_write_wakes_it(kind: str, name: str, woken: int) -> None:
    w = World()
    body = {"apiVersion": API, "kind": kind, "metadata": {"name": name, "resourceVersion": "10"}}
    w.emit("MODIFIED", kind, body)
    assert w.woken()[woken] == {name}
    written = {**body, "metadata": {"name": name, "resourceVersion": "11"}, "status": {"stages": []}}
    w.emit("MODIFIED", kind, written)
    assert w.woken()[woken] == {name}  # its next pass observes what that status makes due


def test_the_echo_of_a_summarys_own_status_write_does_not_wake_it() -> None:
    w = World()
    kind, key, woken = "ClusterSummary", f"{NS}/s1", 2
    body = {"apiVersion": API, "kind": kind, "metadata": {"name": "s1", "namespace": NS}}
    slot = (kind, key)

    def emit(version: str) -> set[str]:
        w.emit("MODIFIED", kind, {**body, "metadata": {**body["metadata"], "resourceVersion": version}})
        return w.woken()[woken]

    assert emit("10") == {key}  # nobody's write we know of
    w.echoes.begin(slot, kind)
    assert emit("11") == set()  # comes while our write is in flight: held...
    w.echoes.end(slot, kind, "11")
    assert w.woken()[woken] == set()  # ...and dropped, it is that write's own event
    w.echoes.begin(slot, kind)
    assert emit("12") == set()  # someone else's change while we write...
    w.echoes.end(slot, kind, "13")
    assert w.woken()[woken] == {key}  # ...wakes us once the write returns
    assert emit("13") == set()  # our write's event, after its response
    w.own.record(slot, "14")
    assert w.own.behind(slot, "13")  # a pass put off until the cache shows our write...
    w.echoes.begin(slot, kind)
    w.echoes.end(slot, kind, "14")
    assert emit("14") == {key}  # ...is woken by it


def test_a_summary_its_profile_applied_wakes_the_summary_and_not_that_profile() -> None:
    w = World()
    w.emit("ADDED", "ClusterProfile", _profile("web-dev", {"policyRefs": [_ref("web")]}))
    w.woken()
    labels = {ss.PROFILE_LABEL: "web-dev", ss.CLUSTER_LABEL: "c1"}
    meta = {"name": "web-dev-sveltos-c1", "namespace": NS, "labels": labels}
    summary = {"apiVersion": API, "kind": "ClusterSummary", "metadata": meta, "spec": {}}
    key = f"{NS}/web-dev-sveltos-c1"
    w.echoes.begin(("ClusterSummary", key), "ClusterProfile")
    w.emit("ADDED", "ClusterSummary", {**summary, "metadata": {**meta, "resourceVersion": "7"}})
    w.echoes.end(("ClusterSummary", key), "ClusterProfile", "7")
    _, profiles, summaries = w.woken()
    assert (profiles, summaries) == (set(), {key})  # the profile knows what it applied
    w.emit("MODIFIED", "ClusterSummary", {**summary, "metadata": {**meta, "resourceVersion": "8"}})
    _, profiles, summaries = w.woken()
    assert (profiles, summaries) == ({"web-dev"}, {key})  # the summary's own change reaches it


def test_a_stage_profile_its_promotion_applied_does_not_wake_that_promotion() -> None:
    w = World()
    body = _profile("web-dev", {"policyRefs": [_ref("web")]})
    body["metadata"].update(labels={"fleetwave.io/promotion": "web"}, generation=2, resourceVersion="5")
    w.echoes.begin(("ClusterProfile", "web-dev"), "ClusterPromotion")
    w.echoes.end(("ClusterProfile", "web-dev"), "ClusterPromotion", "5")
    w.emit("MODIFIED", "ClusterProfile", body)  # the event after the apply's response this time
    promotions, profiles, _ = w.woken()
    assert (promotions, profiles) == (set(), {"web-dev"})
    edited = {**body["metadata"], "generation": 3, "resourceVersion": "6"}
    w.emit("MODIFIED", "ClusterProfile", {**body, "metadata": edited})
    assert w.woken()[0] == {"web"}  # someone else's edit


def test_a_stage_profile_follows_its_summaries_a_moment_later_a_profile_that_paces_at_once() -> None:
    w = World()
    stage = _profile("web-dev", {"policyRefs": [_ref("web")]})
    stage["metadata"]["labels"] = {"fleetwave.io/promotion": "web"}
    w.emit("ADDED", "ClusterProfile", stage)
    w.emit("ADDED", "ClusterProfile", _profile("plain", {"policyRefs": [_ref("web")]}))
    dependent = {"policyRefs": [_ref("web")], "dependsOn": ["web-dev"]}
    w.emit("ADDED", "ClusterProfile", _profile("after", dependent))
    w.woken()
    for profile in ("web-dev", "plain"):
        labels = {ss.PROFILE_LABEL: profile, ss.CLUSTER_LABEL: "c1"}
        meta = {"name": f"{profile}-sveltos-c1", "namespace": NS, "labels": labels, "resourceVersion": "9"}
        w.emit("MODIFIED", "ClusterSummary", {"apiVersion": API, "kind": "ClusterSummary", "metadata": meta})
    assert w.woken()[1] == {"web-dev", "plain", "after"}
    assert w.profiles.delays == {"web-dev": watches.STAGE_PROFILE_FOLLOWS, "plain": 0.0, "after": 0.0}


def test_a_stage_profile_its_promotion_changed_is_passed_a_moment_later_a_plain_one_at_once() -> None:
    # The promotion writes the stage's summaries itself (write_ahead): the profile's pass follows.
    w = World()
    stage = _profile("web-dev", {"policyRefs": [_ref("web")]})
    stage["metadata"]["labels"] = {"fleetwave.io/promotion": "web"}
    w.emit("ADDED", "ClusterProfile", stage)
    w.emit("ADDED", "ClusterProfile", _profile("plain", {"policyRefs": [_ref("web")]}))
    assert w.woken()[1] == {"web-dev", "plain"}
    assert w.profiles.delays == {"web-dev": watches.STAGE_PROFILE_AHEAD, "plain": 0.0}


def test_a_stage_profile_version_due_on_arrival_is_passed_at_once_and_only_that_version() -> None:
    # The promotion could not write the stage's summaries itself: the event of its write is the
    # moment the profile's pass can see what it was given, and nothing should wait after it.
    w = World()
    stage = _profile("web-dev", {"policyRefs": [_ref("web")]})
    stage["metadata"] |= {"labels": {"fleetwave.io/promotion": "web"}, "resourceVersion": "7"}
    w.wakeups.expect_version("web-dev", "8")
    w.emit("MODIFIED", "ClusterProfile", stage)  # an older version: the usual moment later
    assert w.woken()[1] == {"web-dev"}
    assert w.profiles.delays == {"web-dev": watches.STAGE_PROFILE_AHEAD}
    stage["metadata"]["resourceVersion"] = "8"
    w.emit("MODIFIED", "ClusterProfile", stage)
    assert w.woken()[1] == {"web-dev"}
    assert w.profiles.delays == {"web-dev": 0.0}
    w.emit("MODIFIED", "ClusterProfile", stage)  # once: a later change of it is the usual moment later
    assert w.profiles.delays == {"web-dev": watches.STAGE_PROFILE_AHEAD}


# ---- a summary waiting for its profile ----


def test_a_profiles_event_wakes_the_summaries_waiting_for_it_once(world: World) -> None:
    for name in ("p-web-a", "p-web-b"):
        world.wakeups.await_profile("p-web", SummaryKey("fleet", name))
    world.emit("MODIFIED", "ClusterProfile", _profile("p-db", {"policyRefs": [_ref("db")]}))
    assert "fleet/p-web-a" not in world.woken()[2]  # another profile's event wakes none of them
    world.emit("MODIFIED", "ClusterProfile", _profile("p-web", {"policyRefs": [_ref("web")]}))
    assert world.woken()[2] >= {"fleet/p-web-a", "fleet/p-web-b"}
    world.emit("MODIFIED", "ClusterProfile", _profile("p-web", {"policyRefs": [_ref("web2")]}))
    assert not world.woken()[2] & {"fleet/p-web-a", "fleet/p-web-b"}  # woken once, not at every event


def test_a_promotion_is_woken_by_how_far_a_summarys_delivery_got_not_by_each_step_of_it() -> None:
    """ADR 0117: a summary the promotion wrote ahead, and each progress message of its delivery,
    used to wake the promotion for a pass that decided what the one before had decided."""
    w = World()
    stage = _profile("web-dev", {"policyRefs": [_ref("web")]})
    stage["metadata"]["labels"] = {"fleetwave.io/promotion": "web"}
    w.emit("ADDED", "ClusterProfile", stage)
    w.woken()
    labels = {ss.PROFILE_LABEL: "web-dev", ss.CLUSTER_LABEL: "c1"}
    meta = {"name": "web-dev-sveltos-c1", "namespace": NS, "labels": labels, "generation": 1}
    body = {"apiVersion": API, "kind": "ClusterSummary", "metadata": meta, "spec": {}}

    def emit(status: dict[str, Any], event: EventType = "MODIFIED", **changed: Any) -> set[str]:
        w.emit(event, "ClusterSummary", {**body, "metadata": {**meta, **changed}, "status": status})
        return w.woken()[0]

    def ready(status: str, reason: str, message: str) -> dict[str, Any]:
        condition = {"type": "Ready", "status": status, "reason": reason, "message": message}
        return {"observedContentHash": "h1", "conditions": [condition]}

    assert emit({}, "ADDED") == set()  # written ahead: nothing delivered yet
    assert emit(ready("False", "Provisioning", "1 of 3 applied")) == {"web"}
    assert emit(ready("False", "Provisioning", "2 of 3 applied")) == set()  # a step of the same
    assert emit(ready("True", "Provisioned", "deployed and healthy")) == {"web"}  # done
    assert emit(ready("True", "Provisioned", "deployed and healthy")) == set()
    assert emit(ready("False", "Failed", "quota exceeded")) == {"web"}
    assert emit(ready("False", "Failed", "image pull failed")) == {"web"}  # the status names why
    assert emit(ready("False", "Failed", "image pull failed"), generation=2) == {"web"}  # new spec
    assert emit(ready("False", "Failed", "image pull failed"), "DELETED", generation=2) == {"web"}
    assert emit({"observedContentHash": "h0"}, "ADDED") == {"web"}  # made again, holding a revision

"""Only ClusterSummaries fleetwave made are delivered (ADR 0046): a hand-made one is ignored with a
Warning Event and a status condition, never delivered, never counted as a delivery, and deleting it
withdraws nothing."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest

from fleetwave.api import families
from fleetwave.api.sveltos import MAX_LIST
from fleetwave.controllers.shared.context import Context
from fleetwave.controllers.shared.keys import SummaryKey
from fleetwave.controllers.sveltos import content, rollout_common, summary
from fleetwave.controllers.sveltos import summary_status as ss
from fleetwave.controllers.sveltos.summary_memory import SummaryMemory
from fleetwave.runtime.controller import Result

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
NS = "fleet"
SNAPSHOT = content.Resolved(hash="c" * 64, body={"policies": [], "helmCharts": []})


class _Obj:
    def __init__(self, body: dict[str, Any]) -> None:
        self._body = body
        self.apiVersion = body.get("apiVersion")
        self.kind = body.get("kind")
        self.metadata = SimpleNamespace(**body["metadata"])

    @property
    def status(self) -> Any:
        return self._body.get("status")

    def to_dict(self) -> dict[str, Any]:
        return self._body


class _Cache:
    family = families.NATIVE

    def __init__(self, objects: list[dict[str, Any]]) -> None:
        self.objects = {
            (o["kind"], o["metadata"].get("namespace") or "", o["metadata"]["name"]): o for o in objects
        }

    def has(self, kind: str) -> bool:
        return False  # no Cluster API clusters here

    def obj(self, kind: str, namespace: str | None, name: str) -> Any:
        body = self.objects.get((kind, namespace or "", name))
        return None if body is None else _Obj(body)

    def get(self, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        return self.objects.get((kind, namespace or "", name))

    def list(self, kind: str) -> list[dict[str, Any]]:
        return [o for (k, _, _), o in self.objects.items() if k == kind]

    def memo(self, name: str, kind: str, build: Any, *, everywhere: bool = False) -> Any:
        return build()  # nothing kept: every call sees the objects as they are now

    def labelled(self, kind: str, label: str, value: str) -> list[dict[str, Any]]:
        return [
            o for o in self.list(kind) if ((o.get("metadata") or {}).get("labels") or {}).get(label) == value
        ]


@dataclass
class _Client:
    patches: list[tuple[str, Any]] = field(default_factory=list)

    async def patch(self, resource: Any, name: str, body: Any, **_: Any) -> None:
        self.patches.append((name, body))


class _Forbidden:
    """Helm and health ports that must never be used for a summary that is not fleetwave's."""

    def __getattr__(self, name: str) -> Any:
        pytest.fail(f"{name} called: something was delivered or withdrawn")


class _Ctx(Context):
    async def event(self, obj: Any, warning: bool, reason: str, message: str) -> None:
        self.recorder.append((warning, reason, message))  # type: ignore[attr-defined]


def _ctx(cache: _Cache, client: _Client) -> _Ctx:
    return _Ctx(
        client=client,  # type: ignore[arg-type]
        cache=cache,  # type: ignore[arg-type]
        recorder=[],  # type: ignore[arg-type]
        helm=_Forbidden(),  # type: ignore[arg-type]
        health=_Forbidden(),  # type: ignore[arg-type]
        namespace="fleetwave-system",
        clock=lambda: T0,
    )


def _profile(name: str = "web", uid: str = "uid-web", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "fleetwave.io/v1alpha1",
        "kind": "ClusterProfile",
        "metadata": {"name": name, "uid": uid, "annotations": spec.pop("annotations", {})},
        "spec": spec or {"clusterSelector": {"matchLabels": {"env": "dev"}}},
    }


def _member(name: str = "m1", env: str = "dev") -> dict[str, Any]:
    return {
        "apiVersion": "fleetwave.io/v1alpha1",
        "kind": "MemberCluster",
        "metadata": {"name": name, "namespace": NS, "labels": {"env": env}},
        "spec": {},
        "status": {"ready": True},
    }


def _summary(profile: str = "web", uid: str = "uid-web", cluster: str = "m1", **over: Any) -> dict[str, Any]:
    body = {
        "apiVersion": "fleetwave.io/v1alpha1",
        "kind": "ClusterSummary",
        "metadata": {
            "name": ss.summary_name(profile, cluster),
            "namespace": NS,
            "uid": "s-uid",
            "resourceVersion": "9",
            "generation": 1,
            "labels": {
                ss.PROFILE_LABEL: profile,
                ss.SVELTOS_PROFILE_LABEL: profile,
                ss.CLUSTER_LABEL: cluster,
            },
            "annotations": {
                ss.CONTENT_ANNOTATION: SNAPSHOT.snapshot_name,
                ss.CONTENT_HASH_ANNOTATION: SNAPSHOT.hash,
                ss.LEAVE_POLICIES_ANNOTATION: "false",
            },
            "ownerReferences": [
                {
                    "apiVersion": "fleetwave.io/v1alpha1",
                    "kind": "ClusterProfile",
                    "name": profile,
                    "uid": uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "clusterNamespace": NS,
            "clusterName": cluster,
            "clusterType": "Sveltos",
            "clusterProfileSpec": {},
        },
        "status": {},
    }
    for path, value in over.items():
        *parents, last = path.split("__")
        node: Any = body
        for p in parents:
            node = node[p]
        if value is None:
            node.pop(last, None)
        else:
            node[last] = value
    return body


def _hand_made() -> dict[str, Any]:
    """What someone with `create clustersummaries` might write to push a snapshot to a member."""
    return {
        "apiVersion": "fleetwave.io/v1alpha1",
        "kind": "ClusterSummary",
        "metadata": {"name": "push", "namespace": NS, "resourceVersion": "1", "generation": 1},
        "spec": {"clusterNamespace": NS, "clusterName": "m1", "clusterProfileSpec": {}},
        "status": {},
    }


def _world(*extra: dict[str, Any]) -> list[dict[str, Any]]:
    snapshot = content.snapshot_configmap(SNAPSHOT, "fleetwave-system")
    return [_profile(), _member(), snapshot, *extra]


@pytest.mark.parametrize(
    ("doc", "problem"),
    [
        (_hand_made(), f"no {ss.PROFILE_LABEL} label"),
        (_summary(metadata__ownerReferences=None), "no controller reference to ClusterProfile web"),
        (_summary(uid="uid-of-something-else"), "not to the ClusterProfile web that exists"),
        (_summary(metadata__name="web-elsewhere"), "name is not the one fleetwave gives"),
        (_summary(spec__clusterNamespace="other"), "spec.clusterNamespace is not its own namespace"),
        (
            _summary(metadata__annotations={ss.CONTENT_ANNOTATION: "any-configmap"}),
            "does not name a fleetwave content snapshot",
        ),
    ],
)
async def test_a_summary_fleetwave_did_not_make_is_ignored_with_an_event(
    doc: dict[str, Any], problem: str
) -> None:
    client = _Client()
    ctx = _ctx(_Cache(_world(doc)), client)

    result = await summary.reconcile(ctx, SummaryMemory(), f"{NS}/{doc['metadata']['name']}")

    ((_, patch),) = client.patches  # the status only: no finalizer, nothing delivered
    assert set(patch) == {"metadata", "status"}
    (condition,) = patch["status"]["conditions"]
    assert (condition["status"], condition["reason"]) == ("False", summary.NOT_OURS)
    assert problem in condition["message"]
    ((warning, reason, message),) = ctx.recorder  # type: ignore[attr-defined]
    assert (warning, reason) == (True, summary.NOT_OURS)
    assert problem in message
    assert not result.requeue
    assert result.requeue_after is None


async def test_the_event_is_not_repeated_while_nothing_changes() -> None:
    doc = _hand_made()
    client = _Client()
    ctx = _ctx(_Cache(_world(doc)), client)
    await summary.reconcile(ctx, SummaryMemory(), f"{NS}/push")
    doc["status"] = copy.deepcopy(client.patches[0][1]["status"])

    await summary.reconcile(ctx, SummaryMemory(), f"{NS}/push")

    assert len(client.patches) == 1
    assert len(ctx.recorder) == 1  # type: ignore[attr-defined]


async def test_a_summary_fleetwave_made_goes_on_to_delivery() -> None:
    client = _Client()
    ctx = _ctx(_Cache(_world(_summary())), client)

    result = await summary.reconcile(ctx, SummaryMemory(), f"{NS}/{ss.summary_name('web', 'm1')}")

    ((_, patch),) = client.patches
    assert patch == {"metadata": {"finalizers": [ss.FINALIZER]}}  # accepted: the finalizer comes first
    assert result.requeue
    assert ctx.recorder == []  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("world", "woken_by_profile"),
    [
        # The stage profile pins another snapshot than the summary names (it has not caught up yet).
        (
            [_profile(annotations={rollout_common.PINNED_ANNOTATION: "fw-content-" + "d" * 40}), _member()],
            True,
        ),
        # The profile no longer selects the cluster (it will delete the summary).
        ([_profile(), _member(env="prod")], True),
        # A stage profile lists the clusters the promotion admitted: m1 is not (yet) one of them.
        ([_profile(clusterRefs=[{"kind": "MemberCluster", "namespace": NS, "name": "m2"}]), _member()], True),
        # Its profile is gone: garbage collection deletes it next (and its finalizer withdraws).
        ([_member()], False),
    ],
)
async def test_a_summary_its_profile_does_not_want_as_it_is_waits_without_delivering(
    world: list[dict[str, Any]], woken_by_profile: bool
) -> None:
    client = _Client()
    ctx = _ctx(_Cache([*world, _summary()]), client)
    key = f"{NS}/{ss.summary_name('web', 'm1')}"

    result = await summary.reconcile(ctx, SummaryMemory(), key)

    assert client.patches == []
    assert ctx.recorder == []  # type: ignore[attr-defined]
    # The profile's next event wakes it, a re-check long after is the net; a profile that is gone has
    # no event to wait for: retried with backoff.
    assert ctx.wakeups.take_waiting("web") == ([SummaryKey.parse(key)] if woken_by_profile else [])
    waiting = Result(requeue_after=summary.PROFILE_WAIT_NET, poll=True)
    assert result == (waiting if woken_by_profile else Result(requeue=True))


async def test_a_summary_is_judged_against_its_stage_profile_as_a_promotion_wrote_it() -> None:
    """The promotion wrote the stage profile with m1 admitted; the cache still shows the version
    before (the profile's watch runs behind): the summary goes on to delivery at once."""
    refs = {"kind": "MemberCluster", "namespace": NS}
    cached = _profile(clusterRefs=[{**refs, "name": "m2"}])
    cached["metadata"]["resourceVersion"] = "20"
    written = copy.deepcopy(cached)
    written["metadata"]["resourceVersion"] = "21"
    written["spec"]["clusterRefs"] = [{**refs, "name": "m1"}, {**refs, "name": "m2"}]
    snapshot = content.snapshot_configmap(SNAPSHOT, "fleetwave-system")
    client = _Client()
    ctx = _ctx(_Cache([cached, _member(), snapshot, _summary()]), client)
    key = f"{NS}/{ss.summary_name('web', 'm1')}"

    await summary.reconcile(ctx, SummaryMemory(), key)
    assert client.patches == []  # as the cache shows the profile, m1 is not admitted: it waits
    assert ctx.wakeups.profile_written("web", written) == [SummaryKey.parse(key)]  # woken by the write

    await summary.reconcile(ctx, SummaryMemory(), key)
    ((_, patch),) = client.patches
    assert patch == {"metadata": {"finalizers": [ss.FINALIZER]}}  # accepted: on to delivery


async def test_deleting_a_summary_fleetwave_did_not_make_withdraws_nothing() -> None:
    doc = _summary(uid="forged")
    doc["metadata"]["deletionTimestamp"] = "2026-11-22T09:00:00Z"
    doc["metadata"]["finalizers"] = [ss.FINALIZER]
    doc["status"] = {"helmReleaseSummaries": [{"releaseName": "kyverno", "releaseNamespace": "kyverno"}]}
    client = _Client()
    ctx = _ctx(_Cache(_world(doc)), client)

    await summary.reconcile(
        ctx, SummaryMemory(), f"{NS}/{doc['metadata']['name']}"
    )  # _Forbidden: no helm, no withdraw

    ((_, patch),) = client.patches
    assert patch == {"metadata": {"finalizers": []}}
    assert [r for _, r, _ in ctx.recorder] == [summary.NOT_OURS]  # type: ignore[attr-defined]


def test_a_release_only_status_names_is_removed_only_when_labelled_ours() -> None:
    chart = {"chart": {"releaseName": "web", "releaseNamespace": "web"}, "values": {}}
    resolved = content.Resolved(hash="e" * 64, body={"policies": [], "helmCharts": [chart]})
    doc = _summary(metadata__annotations={ss.CONTENT_ANNOTATION: resolved.snapshot_name})
    doc["status"] = {
        "helmReleaseSummaries": [
            {"releaseName": "web", "releaseNamespace": "web"},
            {"releaseName": "kyverno", "releaseNamespace": "kyverno"},  # written by someone else
        ]
    }
    ctx = _ctx(_Cache([content.snapshot_configmap(resolved, "fleetwave-system")]), _Client())
    assert summary._releases_to_uninstall(doc, summary._snapshot(ctx, doc)) == [
        ("web", "web", False),  # its own snapshot names it too: removed even without a label
        ("kyverno", "kyverno", True),
    ]


def test_a_summary_finalized_after_its_snapshot_is_gone_still_removes_its_releases() -> None:
    """Garbage collection deletes the snapshot with the profile, often before the summaries'
    finalizers run: what status names is still removed when its owner label is ours."""
    doc = _summary(metadata__annotations={ss.CONTENT_ANNOTATION: "fw-content-" + "e" * 40})
    doc["status"] = {"helmReleaseSummaries": [{"releaseName": "web", "releaseNamespace": "web"}]}
    ctx = _ctx(_Cache([]), _Client())

    assert summary._snapshot(ctx, doc) == {}
    assert summary._releases_to_uninstall(doc, {}) == [("web", "web", True)]


def test_a_release_installed_before_status_recorded_it_is_still_removed() -> None:
    chart = {"chart": {"releaseName": "web", "releaseNamespace": "web"}, "values": {}}
    assert summary._releases_to_uninstall(_summary(), {"helmCharts": [chart]}) == [("web", "web", True)]


def test_a_summary_deleted_before_its_status_and_after_its_snapshot_removes_what_its_spec_names() -> None:
    """Both races at once: no status written yet, the snapshot already collected. The summary's
    own copy of its profile's spec still names the chart: its release goes when labelled ours."""
    chart = {"repositoryURL": "https://charts.example", "chartName": "web", "releaseName": "web"}
    doc = _summary(spec__clusterProfileSpec={"helmCharts": [{**chart, "releaseNamespace": "web"}]})
    assert summary._releases_to_uninstall(doc, {}) == [("web", "web", True)]


def test_a_release_the_spec_and_the_status_name_without_the_snapshot_needs_our_label() -> None:
    chart = {"chart": {"releaseName": "web", "releaseNamespace": "web"}, "values": {}}
    doc = _summary(
        spec__clusterProfileSpec={"helmCharts": [{"releaseName": "web", "releaseNamespace": "web"}]}
    )
    doc["status"] = {"helmReleaseSummaries": [{"releaseName": "web", "releaseNamespace": "web"}]}
    assert summary._releases_to_uninstall(doc, {}) == [("web", "web", True)]
    assert summary._releases_to_uninstall(doc, {"helmCharts": [chart]}) == [("web", "web", False)]


@pytest.mark.parametrize(
    "charts",
    [
        "not a list",
        ["not an entry", {"releaseName": 7}],
        [{"releaseName": f"r{i}", "releaseNamespace": "x"} for i in range(1000)],
    ],
)
def test_a_spec_s_charts_are_read_within_bounds_whatever_their_shape(charts: Any) -> None:
    doc = _summary(spec__clusterProfileSpec={"helmCharts": charts})
    named = summary._releases_to_uninstall(doc, {})
    assert len(named) <= MAX_LIST
    assert all(owned_only for _, _, owned_only in named)


def test_a_status_listing_more_releases_than_a_profile_may_have_is_cut_to_that_bound() -> None:
    doc = _summary()
    doc["status"] = {
        "helmReleaseSummaries": [{"releaseName": f"r{i}", "releaseNamespace": "x"} for i in range(1000)]
    }
    assert len(summary._releases_to_uninstall(doc, {})) == MAX_LIST


def test_hand_made_summaries_never_count_as_a_profile_s_deliveries() -> None:
    ours = _summary()
    forged = _summary(uid="forged", metadata__name="web-sveltos-m1-copy")
    forged["status"] = {"observedContentHash": "x", "conditions": [{"type": "Ready", "status": "True"}]}
    cache = _Cache([_profile(), ours, forged])

    found = rollout_common.summaries_of(cache, "web")  # type: ignore[arg-type]

    assert found == {f"{NS}/m1": ours}


def test_foreign_checks_the_shape_fleetwave_writes() -> None:
    assert ss.foreign(_summary()) == ""
    assert ss.foreign(_summary(), "web", "uid-web") == ""
    assert "another profile" in ss.foreign(_summary(), "api", "uid-web")
    wrong_label = _summary(metadata__labels={ss.PROFILE_LABEL: "web", ss.CLUSTER_LABEL: "m2"})
    assert "does not name spec.clusterName" in ss.foreign(wrong_label)
    not_controller = _summary()
    not_controller["metadata"]["ownerReferences"][0]["controller"] = False
    assert "no controller reference" in ss.foreign(not_controller)


async def test_a_summary_of_a_stage_profile_a_promotion_just_created_goes_on_before_its_cache_event() -> None:
    """The promotion's write created the profile with m1 admitted and returned; the summary written
    after it arrives while the profile's creation has not reached the cache."""
    refs = {"kind": "MemberCluster", "namespace": NS}
    created = _profile(clusterRefs=[{**refs, "name": "m1"}])
    created["metadata"]["resourceVersion"] = "21"
    snapshot = content.snapshot_configmap(SNAPSHOT, "fleetwave-system")
    client = _Client()
    ctx = _ctx(_Cache([_member(), snapshot, _summary()]), client)
    key = f"{NS}/{ss.summary_name('web', 'm1')}"
    ctx.wakeups.profile_written("web", created)

    await summary.reconcile(ctx, SummaryMemory(), key)
    ((_, patch),) = client.patches
    assert patch == {"metadata": {"finalizers": [ss.FINALIZER]}}  # accepted: on to delivery

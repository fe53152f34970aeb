"""A promotion writes its stage profile's new summaries itself (`write_ahead`), exactly as the
profile's own pass would, and nothing that pass would not write; for a profile that only gains
clusters, together with the profile's own write."""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
from types import SimpleNamespace
from typing import Any

import pytest

from fleetwave.api import families
from fleetwave.api.sveltos import ClusterProfile
from fleetwave.controllers.shared.context import Context
from fleetwave.controllers.shared.keys import SummaryKey
from fleetwave.controllers.sveltos import (
    content,
    profile_scope,
    promotion,
    rollout_common,
    summary_writes,
)
from fleetwave.controllers.sveltos import summary_status as ss

RESOLVED = content.Resolved(hash="h" * 64, body={})


class _Obj:
    def __init__(self, body: dict[str, Any]) -> None:
        self._body = body
        self.metadata = SimpleNamespace(**body["metadata"])

    def to_dict(self) -> dict[str, Any]:
        return self._body


def _member(name: str, *, ready: bool) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "fleet", "labels": {"env": "dev"}},
        "status": {"ready": ready},
    }


class _Cache:
    family = families.NATIVE

    def __init__(self, members: list[dict[str, Any]]) -> None:
        self.members = members

    def list(self, kind: str) -> list[dict[str, Any]]:
        return self.members if kind == "MemberCluster" else []

    def has(self, kind: str) -> bool:
        return False  # no Cluster API clusters here

    def get(self, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        return None  # no summary written yet

    def memo(self, name: str, kind: str, build: Any, *, everywhere: bool = False) -> Any:
        return build()


class _Client:
    def __init__(self) -> None:
        self.applied: list[dict[str, Any]] = []

    async def apply(self, obj: Any, **_: Any) -> Any:
        body = obj.to_dict() if hasattr(obj, "to_dict") else dict(obj)
        self.applied.append(body)
        return _Obj(
            {"metadata": {"name": body["metadata"]["name"], "resourceVersion": str(len(self.applied))}}
        )


def _ctx(client: _Client, members: list[dict[str, Any]] | None = None) -> Context:
    if members is None:
        members = [_member("a", ready=True), _member("b", ready=False), _member("c", ready=True)]
    return Context(
        client=client,  # type: ignore[arg-type]
        cache=_Cache(members),  # type: ignore[arg-type]
        recorder=None,  # type: ignore[arg-type]
        helm=None,  # type: ignore[arg-type]
        health=None,  # type: ignore[arg-type]
        namespace="fleetwave-system",
        clock=lambda: dt.datetime(2026, 11, 26, tzinfo=dt.UTC),
    )


_VERSIONS = iter(range(1, 1000))


def _stage_profile(refs: list[str], **spec: Any) -> _Obj:
    # Each its own resourceVersion: specs are parsed once per version.
    version = str(next(_VERSIONS))
    return _Obj(
        {
            "apiVersion": "fleetwave.io/v1alpha1",
            "kind": "ClusterProfile",
            "metadata": {"name": "promo-dev", "uid": "u-1", "resourceVersion": version, "generation": 1},
            "spec": {
                "clusterRefs": [{"namespace": "fleet", "name": r} for r in refs],
                "syncMode": "Continuous",
                "policyRefs": [{"kind": "ConfigMap", "name": "content", "namespace": "fleetwave-system"}],
                **spec,
            },
        }
    )


async def test_the_summaries_written_ahead_are_the_ones_the_profile_pass_writes() -> None:
    owner = _stage_profile(["a", "b", "c"])
    ahead = _Client()
    wrote_all = await summary_writes.write_ahead(
        _ctx(ahead), owner, RESOLVED, ["fleet/a", "fleet/b", "fleet/c"]
    )
    # b is not ready: the engine would not start it, so neither is it written ahead; the profile's
    # pass is then told it has work (not all were written).
    assert wrote_all is False
    assert [b["metadata"]["name"] for b in ahead.applied] == [
        ss.summary_name("promo-dev", "a"),
        ss.summary_name("promo-dev", "c"),
    ]
    by_profile = _Client()
    parsed = rollout_common.parse_as(owner.to_dict(), "ClusterProfile", ClusterProfile)
    await summary_writes.apply_all(_ctx(by_profile), parsed, RESOLVED, ["fleet/a", "fleet/c"])
    assert ahead.applied == by_profile.applied  # the profile's pass finds them written, byte for byte
    assert ahead.applied[0]["metadata"]["ownerReferences"][0]["uid"] == "u-1"


@pytest.mark.parametrize(
    ("refs", "spec", "why"),
    [
        (["a"], {"dependsOn": ["base"]}, "dependsOn holds clusters only the profile's pass knows of"),
        (["a"], {"syncMode": "Sometimes"}, "invalid: a syncMode the API refuses"),
        (["c"], {}, "a does not belong to the profile (yet)"),
    ],
)
async def test_nothing_is_written_ahead_that_the_profile_pass_might_not_write(
    refs: list[str], spec: dict[str, Any], why: str
) -> None:
    client = _Client()
    assert not await summary_writes.write_ahead(
        _ctx(client), _stage_profile(refs, **spec), RESOLVED, ["fleet/a"]
    )
    assert client.applied == [], why


async def test_all_written_ahead_says_so_and_a_large_batch_is_left_to_the_profile() -> None:
    client = _Client()
    both = ["fleet/a", "fleet/c"]
    assert await summary_writes.write_ahead(_ctx(client), _stage_profile(["a", "c"]), RESOLVED, both)
    assert len(client.applied) == 2
    many = [f"m{i}" for i in range(summary_writes.WRITE_AHEAD_MAX + 1)]
    big = _Client()
    ctx = _ctx(big, [_member(m, ready=True) for m in many])
    keys = [f"fleet/{m}" for m in many]
    assert not await summary_writes.write_ahead(ctx, _stage_profile(many), RESOLVED, keys)
    assert big.applied == []  # a worker held for many writes holds every promotion behind it


async def test_nothing_is_written_ahead_for_a_profile_being_deleted() -> None:
    owner = _stage_profile(["a"])
    owner.to_dict()["metadata"]["deletionTimestamp"] = "2026-11-26T10:00:00Z"
    client = _Client()
    assert not await summary_writes.write_ahead(_ctx(client), owner, RESOLVED, ["fleet/a"])
    assert client.applied == []


# ---- a stage profile that only gains clusters, written together with its summaries ----
# What the summaries carry of such a profile is known before the API server answers.

NAME = "promo-dev"


def _stored(refs: list[str], *, pin: str = "old", version: str = "7", **spec: Any) -> dict[str, Any]:
    """A stage profile as the API server stores it: a schema default (`tier`) filled in."""
    return {
        "apiVersion": "fleetwave.io/v1alpha1",
        "kind": "ClusterProfile",
        "metadata": {
            "name": NAME,
            "uid": "u-1",
            "resourceVersion": version,
            "generation": 3,
            "annotations": {rollout_common.PINNED_ANNOTATION: pin, "someone.else/note": "kept"},
        },
        "spec": {
            "clusterRefs": [{"namespace": "fleet", "name": r} for r in refs],
            "syncMode": "Continuous",
            "policyRefs": [{"kind": "ConfigMap", "name": "content", "namespace": "fleetwave-system"}],
            "tier": 100,
            **spec,
        },
        "status": {"matchingClusters": []},
    }


def _body(refs: list[str], *, pin: str = "new", **spec: Any) -> dict[str, Any]:
    """What a promotion's pass applies: no schema defaults, the pin it wants."""
    return {
        "apiVersion": "fleetwave.io/v1alpha1",
        "kind": "ClusterProfile",
        "metadata": {"name": NAME, "annotations": {rollout_common.PINNED_ANNOTATION: pin}},
        "spec": {
            "clusterRefs": [{"namespace": "fleet", "name": r} for r in refs],
            "syncMode": "Continuous",
            "policyRefs": [{"kind": "ConfigMap", "name": "content", "namespace": "fleetwave-system"}],
            **spec,
        },
    }


def test_a_profile_gaining_clusters_is_known_as_it_will_be_stored() -> None:
    ahead = promotion._as_stored(_stored(["a"]), _body(["a", "b"]))
    assert ahead is not None
    assert ahead["metadata"]["uid"] == "u-1"
    assert "resourceVersion" not in ahead["metadata"]  # no version the cache has parsed
    assert ahead["metadata"]["annotations"] == {
        rollout_common.PINNED_ANNOTATION: "new",
        "someone.else/note": "kept",
    }
    assert ahead["spec"] == _stored(["a", "b"])["spec"]  # the default kept, the refs moved


def test_a_new_profile_or_another_change_waits_for_the_api_servers_answer() -> None:
    assert promotion._as_stored(None, _body(["a"])) is None
    assert promotion._as_stored(_stored(["a"]), _body(["a"], syncMode="OneTime")) is None
    deleting = _stored(["a"])
    deleting["metadata"]["deletionTimestamp"] = "2026-11-27T00:00:00Z"
    assert promotion._as_stored(deleting, _body(["a", "b"])) is None


class _ProfileCache:
    family = families.NATIVE

    def __init__(self, profile: dict[str, Any]) -> None:
        self.profile = profile
        self.members = [
            {"metadata": {"name": n, "namespace": "fleet", "labels": {}}, "status": {"ready": True}}
            for n in ("a", "b")
        ]

    def list(self, kind: str) -> list[dict[str, Any]]:
        return self.members if kind == "MemberCluster" else []

    def has(self, kind: str) -> bool:
        return False  # no Cluster API clusters here

    def get(self, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        return self.profile if kind == "ClusterProfile" else None

    def memo(self, name: str, kind: str, build: Any, *, everywhere: bool = False) -> Any:
        return build()


class _Server:
    """Stores a profile as the API server would (defaults from the stored one, a new version) and
    answers it only once a summary write has arrived: written one after the other, the stage's
    writes never finish."""

    def __init__(self, stored: dict[str, Any]) -> None:
        self.stored = stored
        self.applied: list[dict[str, Any]] = []
        self.summary_seen = asyncio.Event()

    async def apply(self, obj: Any, **_: Any) -> Any:
        body = obj.to_dict() if hasattr(obj, "to_dict") else dict(obj)
        self.applied.append(body)
        if body["kind"] == "ClusterSummary":
            self.summary_seen.set()
            return _Obj({"metadata": {"name": body["metadata"]["name"], "resourceVersion": "9"}})
        await asyncio.wait_for(self.summary_seen.wait(), 2)
        stored = copy.deepcopy(self.stored)
        stored["metadata"]["resourceVersion"] = "8"
        stored["metadata"]["annotations"].update(body["metadata"]["annotations"])
        stored["spec"] = {**stored["spec"], **body["spec"]}
        return _Obj(stored)


def _server_ctx(client: _Server, cache: _ProfileCache) -> Context:
    return Context(
        client=client,  # type: ignore[arg-type]
        cache=cache,  # type: ignore[arg-type]
        recorder=None,  # type: ignore[arg-type]
        helm=None,  # type: ignore[arg-type]
        health=None,  # type: ignore[arg-type]
        namespace="fleetwave-system",
        clock=lambda: dt.datetime(2026, 11, 27, tzinfo=dt.UTC),
    )


def _run() -> Any:
    owner = _Obj({"metadata": {"name": "promo", "uid": "p-1"}})
    return SimpleNamespace(parsed=owner, obj=owner, resolved=RESOLVED)


def _newly_pinned() -> promotion._StageProfile:
    """The dev stage profile as a promotion wants it with a new pin (clusterRefs are added per call)."""
    return promotion._StageProfile(
        name=NAME,
        stage="dev",
        spec={k: v for k, v in _body([])["spec"].items() if k != "clusterRefs"},
        annotations={rollout_common.PINNED_ANNOTATION: "new"},
    )


async def test_the_summaries_go_out_while_the_profile_write_is_in_flight() -> None:
    stored = _stored(["a"])
    server = _Server(stored)
    ctx = _server_ctx(server, _ProfileCache(stored))
    await promotion._deliver_stage(ctx, _run(), _newly_pinned(), ("fleet/a", "fleet/b"))
    kinds = [b["kind"] for b in server.applied]
    assert kinds.count("ClusterProfile") == 1
    written = [b for b in server.applied if b["kind"] == "ClusterSummary"]
    assert [b["metadata"]["name"] for b in written] == [ss.summary_name(NAME, c) for c in ("a", "b")]
    # What the profile's own pass will write from the stored profile: the same bodies, byte for byte.
    again = _Server(stored)
    again.summary_seen.set()
    answered = await again.apply(_body(["a", "b"]))
    parsed = rollout_common.parse_as(answered.to_dict(), "ClusterProfile", ClusterProfile)
    await summary_writes.apply_all(
        _server_ctx(again, _ProfileCache(stored)), parsed, RESOLVED, ["fleet/a", "fleet/b"]
    )
    assert [b for b in again.applied if b["kind"] == "ClusterSummary"] == written


async def test_a_stage_profile_write_wakes_the_summaries_waiting_for_it_and_is_judged_as_written() -> None:
    """The summaries of a stage judge themselves against the profile as the promotion's write
    returned it, and those that already found it behind are woken when the write returns, not when
    the profile's watch (behind under load) shows it."""
    stored = _stored(["a"])
    stored["metadata"]["managedFields"] = [{"manager": "fleetwave", "operation": "Apply"}]
    cache = _ProfileCache(stored)
    ctx = _server_ctx(_Server(stored), cache)
    woken: list[str] = []
    ctx.queues.add("ClusterSummary", woken.append)
    waiting = SummaryKey.parse(f"fleet/{ss.summary_name(NAME, 'b')}")
    ctx.wakeups.await_profile(NAME, waiting)
    await promotion._deliver_stage(ctx, _run(), _newly_pinned(), ("fleet/a", "fleet/b"))
    assert woken == [waiting.key]
    judged = ctx.wakeups.as_written(NAME, cache.get("ClusterProfile", None, NAME))
    assert judged is not None
    assert judged["metadata"]["resourceVersion"] == "8"  # the cache shows "7"
    assert [r["name"] for r in judged["spec"]["clusterRefs"]] == ["a", "b"]
    assert "managedFields" not in judged["metadata"]  # as the cache will hold it


class _RefusingServer(_Server):
    """Refuses the profile; a summary write stays in flight until it is cancelled."""

    def __init__(self, stored: dict[str, Any]) -> None:
        super().__init__(stored)
        self.cancelled = 0

    async def apply(self, obj: Any, **_: Any) -> Any:
        body = obj.to_dict() if hasattr(obj, "to_dict") else dict(obj)
        if body["kind"] == "ClusterProfile":
            await asyncio.sleep(0.01)  # the summaries' writes are in flight by now
            raise RuntimeError("refused")
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise


async def test_a_refused_profile_write_leaves_no_summary_write_behind() -> None:
    stored = _stored(["a"])
    server = _RefusingServer(stored)
    wanted = promotion._StageProfile(
        name=NAME,
        stage="dev",
        spec={k: v for k, v in _body([])["spec"].items() if k != "clusterRefs"},
        annotations={rollout_common.PINNED_ANNOTATION: "new"},
    )
    with pytest.raises(RuntimeError, match="refused"):
        await promotion._deliver_stage(
            _server_ctx(server, _ProfileCache(stored)), _run(), wanted, ("fleet/a", "fleet/b")
        )
    await asyncio.sleep(0)  # the cancellations land
    assert server.cancelled == 2


async def _labels_written(labels: dict[str, str], annotations: dict[str, str]) -> dict[str, str]:
    body = _stage_profile(["a"]).to_dict()
    # Parses are memoised by name and version: this body is neither of another test's.
    version = f"labelled-{next(_VERSIONS)}"
    meta = {"name": "p--fleet.web", "resourceVersion": version, "labels": labels, "annotations": annotations}
    body["metadata"] = {**body["metadata"], **meta}
    parsed = rollout_common.parse_as(body, "ClusterProfile", ClusterProfile)
    client = _Client()
    await summary_writes.apply_all(_ctx(client), parsed, RESOLVED, ["fleet/a"])
    return dict(client.applied[0]["metadata"]["labels"])


async def test_a_profiles_generated_profile_labels_its_summaries_with_the_profiles_name() -> None:
    """Sveltos labels a Profile's summaries `projectsveltos.io/profile-name` (ADR 0110); a label that
    does not match the annotation's namespace is nobody's, and other profiles' summaries are as
    they were."""
    generated = profile_scope.generate("fleet", "web", {})
    labels = await _labels_written(dict(generated.labels), dict(generated.annotations))
    assert labels[profile_scope.SVELTOS_PROFILE_NAME_LABEL] == "web"
    forged = {profile_scope.PROFILE_ANNOTATION: "other/web"}
    labels = await _labels_written(dict(generated.labels), forged)
    assert profile_scope.SVELTOS_PROFILE_NAME_LABEL not in labels
    assert profile_scope.SVELTOS_PROFILE_NAME_LABEL not in await _labels_written({}, {})

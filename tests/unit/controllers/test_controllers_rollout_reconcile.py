"""The shared rollout skeleton: one pass, one status write, after-write effects only once recorded."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

from lightkube import ApiError
from lightkube.models import meta_v1

from fleetwave.api import families
from fleetwave.controllers.shared import passes
from fleetwave.controllers.shared.context import Context
from fleetwave.controllers.shared.status_writer import PROGRESS_EVERY, StatusWriter, Whose
from fleetwave.controllers.sveltos import content, rollout_common, rollout_reconcile
from fleetwave.controllers.sveltos import summary_status as ss
from fleetwave.controllers.sveltos.rollout_reconcile import Observation, Pass, Prepared
from fleetwave.core import effects as fx
from fleetwave.core import model as m
from fleetwave.runtime.controller import Result

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
KIND = "ClusterProfile"


class _Obj:
    """What an informer cache holds: attribute access plus `to_dict`."""

    def __init__(self, body: dict[str, Any]) -> None:
        self._body = body
        self.apiVersion = body["apiVersion"]
        self.kind = body["kind"]
        self.metadata = SimpleNamespace(**body["metadata"])
        self.status = body.get("status")

    def to_dict(self) -> dict[str, Any]:
        return self._body


def _profile(*, deleting: bool = False, version: str = "7") -> _Obj:
    meta = {
        "name": "p",
        "namespace": None,
        "uid": "u1",
        "resourceVersion": version,
        "generation": 3,
        "deletionTimestamp": "2026-11-22T09:00:00Z" if deleting else None,
    }
    return _Obj({"apiVersion": "fleetwave.io/v1alpha1", "kind": KIND, "metadata": meta, "status": {}})


class _Cache:
    family = families.NATIVE

    def __init__(self, objects: Mapping[tuple[str, str], Any]) -> None:
        self.objects_ = dict(objects)

    def has(self, kind: str) -> bool:
        return False  # no Cluster API clusters here

    def obj(self, kind: str, namespace: str | None, name: str) -> Any:
        return self.objects_.get((kind, name))

    def get(self, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        found = self.obj(kind, namespace, name)
        return None if found is None else found.to_dict()

    def list(self, kind: str) -> list[dict[str, Any]]:
        return [o.to_dict() for (k, _), o in self.objects_.items() if k == kind]

    def memo(self, name: str, kind: str, build: Any, *, everywhere: bool = False) -> Any:
        return build()  # nothing kept: every call sees the objects as they are now

    def labelled(self, kind: str, label: str, value: str) -> list[dict[str, Any]]:
        return [
            o for o in self.list(kind) if ((o.get("metadata") or {}).get("labels") or {}).get(label) == value
        ]


def _conflict() -> ApiError:
    return ApiError(status=meta_v1.Status(code=409, message="conflict"))


@dataclass
class _Client:
    conflict: bool = False
    calls: list[tuple[str, Any]] = field(default_factory=list)
    written_version: str | None = None  # what the API server answers a status write with

    async def patch(self, resource: Any, name: str, body: Any, **_: Any) -> Any:
        self.calls.append(("patch", body))
        if self.conflict:
            raise _conflict()
        if self.written_version is None:
            return None
        meta = {"name": name, "namespace": None, "resourceVersion": self.written_version}
        return _Obj({"apiVersion": "v", "kind": KIND, "metadata": meta, "status": body["status"]})

    async def create(self, obj: Any) -> None:
        self.calls.append(("create", obj.metadata.name))


class _Ctx(Context):
    async def event(self, obj: Any, warning: bool, reason: str, message: str) -> None:
        self.recorder.append((warning, reason, message))  # type: ignore[attr-defined]


def _ctx(
    cache: _Cache,
    client: _Client,
    clock: Callable[[], datetime] = lambda: T0,
    statuses: StatusWriter | None = None,
) -> _Ctx:
    return _Ctx(
        statuses=statuses or StatusWriter(),
        client=client,  # type: ignore[arg-type]
        cache=cache,  # type: ignore[arg-type]
        recorder=[],  # type: ignore[arg-type]
        helm=None,  # type: ignore[arg-type]
        health=None,  # type: ignore[arg-type]
        namespace="fleetwave-system",
        clock=clock,
    )


def _spec() -> m.RolloutSpec:
    stage = m.StageSpec("all", m.Selector(), after=(m.Delay(timedelta(minutes=5)),))
    return m.RolloutSpec(name="p", revision=m.Revision("c1", "s1"), stages=(stage,))


class _Fake:
    """A rollout kind that records what the skeleton asks of it."""

    kind = KIND

    def __init__(self, *, invalid: str = "", pending: str = "") -> None:
        self.invalid, self.pending = invalid, pending
        self.log: list[str] = []
        self.progress = False

    def prepare(self, ctx: Context, raw: Mapping[str, Any]) -> Prepared[str]:
        if self.invalid:
            raise content.ContentError(self.invalid)
        if self.pending:
            raise content.ContentPending(self.pending)
        return Prepared("parsed", content.Resolved(hash="h" * 64, body={}), _spec())

    async def observe(self, ctx: Context, run: Pass[str]) -> Observation[int]:
        self.log.append(f"observe now={run.now.isoformat()} generation={run.generation}")
        return Observation(m.Observed(previous=run.previous), 42)

    async def act(self, ctx: Context, run: Pass[str], facts: int, decision: fx.Decision) -> None:
        self.log.append(f"act facts={facts}")

    def status(self, run: Pass[str], facts: int, decision: fx.Decision) -> dict[str, Any]:
        self.log.append("status")
        return {"phase": decision.status.phase.value}

    def progress_only(self, previous: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
        return self.progress

    async def after_status(self, ctx: Context, run: Pass[str], decision: fx.Decision) -> None:
        self.log.append("after_status")


async def test_a_pass_observes_acts_writes_status_once_then_runs_after_write_effects() -> None:
    client, rollout = _Client(), _Fake()
    cache = _Cache({(KIND, "p"): _profile(), ("MemberCluster", "a"): _member("a")})

    result = await rollout_reconcile.reconcile(_ctx(cache, client), "p", rollout)

    assert rollout.log == [
        f"observe now={T0.isoformat()} generation=3",
        "status",  # rendered from the observation and the decision (pure), written after acting
        "act facts=42",
        "after_status",
    ]
    kinds_of_calls = [c[0] for c in client.calls]
    assert kinds_of_calls == ["create", "patch"]  # the content snapshot, then the one status write
    assert client.calls[1][1]["metadata"] == {"resourceVersion": "7"}
    assert not result.requeue
    assert result.requeue_after is None or result.requeue_after > 0


async def test_a_progress_only_status_is_held_back_after_a_recent_write_and_written_once_due() -> None:
    client, rollout = _Client(), _Fake()
    rollout.progress = True
    elapsed = [0.0]
    statuses = StatusWriter(clock=lambda: elapsed[0])
    ctx = _ctx(
        _Cache({(KIND, "p"): _profile(), ("MemberCluster", "a"): _member("a")}), client, statuses=statuses
    )

    await rollout_reconcile.reconcile(ctx, "p", rollout)
    patches = lambda: [c for c in client.calls if c[0] == "patch"]  # noqa: E731
    assert len(patches()) == 1  # nothing written by this process yet
    assert statuses.progress_due_in(Whose(KIND, "p")) == PROGRESS_EVERY
    client.calls.clear()
    result = await rollout_reconcile.reconcile(ctx, "p", rollout)
    assert patches() == []  # written a moment ago: the progress waits
    assert result.requeue_after is not None
    assert 0 < result.requeue_after <= PROGRESS_EVERY
    elapsed[0] += PROGRESS_EVERY
    await rollout_reconcile.reconcile(ctx, "p", rollout)
    assert len(patches()) == 1  # due now
    rollout.progress = False
    client.calls.clear()
    await rollout_reconcile.reconcile(ctx, "p", rollout)
    assert len(patches()) == 1  # anything more than progress: at once


async def test_a_status_conflict_waits_for_the_newer_versions_event_and_skips_after_write_effects() -> None:
    client, rollout = _Client(conflict=True), _Fake()
    cache = _Cache({(KIND, "p"): _profile()})

    result = await rollout_reconcile.reconcile(_ctx(cache, client), "p", rollout)

    # A promotion's or profile's own watch takes its every change: the newer version wakes it.
    assert result == Result(requeue_after=passes.CONFLICT_NET, poll=True)
    assert "after_status" not in rollout.log


async def test_an_invalid_spec_is_reported_in_status_and_not_retried() -> None:
    client, rollout = _Client(), _Fake(invalid="spec.policyRefs[0]: ConfigMap x/y not found")
    ctx = _ctx(_Cache({(KIND, "p"): _profile()}), client)

    result = await rollout_reconcile.reconcile(ctx, "p", rollout)

    assert rollout.log == []
    ((_, body),) = client.calls
    (condition,) = body["status"]["conditions"]
    assert condition["reason"] == "InvalidSpec"
    assert condition["lastTransitionTime"] == "2026-11-22T10:00:00Z"
    assert condition["observedGeneration"] == 3
    assert ctx.recorder == [(True, "InvalidSpec", "spec.policyRefs[0]: ConfigMap x/y not found")]
    assert not result.requeue
    assert result.requeue_after is None


async def test_a_flux_artifact_not_fetched_yet_is_said_and_retried_without_an_event() -> None:
    """ADR 0103: no revision is made while an artifact is pending; nothing is wrong with the spec."""
    client, rollout = _Client(), _Fake(pending="GitRepository/flux/apps: the artifact server answered 503")
    ctx = _ctx(_Cache({(KIND, "p"): _profile()}), client)

    result = await rollout_reconcile.reconcile(ctx, "p", rollout)

    assert rollout.log == []
    ((_, body),) = client.calls
    (condition,) = body["status"]["conditions"]
    assert (condition["reason"], condition["status"]) == ("ContentPending", "False")
    assert condition["message"] == "GitRepository/flux/apps: the artifact server answered 503"
    assert ctx.recorder == []
    assert result.requeue_after == rollout_common.PENDING_RETRY


async def test_a_deleted_or_missing_object_is_left_to_garbage_collection() -> None:
    for cache in (_Cache({(KIND, "p"): _profile(deleting=True)}), _Cache({})):
        client, rollout = _Client(), _Fake()
        result = await rollout_reconcile.reconcile(_ctx(cache, client), "p", rollout)
        assert (rollout.log, client.calls) == ([], [])
        assert not result.requeue
        assert result.requeue_after is None


def _member(name: str) -> _Obj:
    meta = {"name": name, "namespace": "fleet", "labels": {"env": "dev"}}
    return _Obj(
        {
            "apiVersion": "fleetwave.io/v1alpha1",
            "kind": "MemberCluster",
            "metadata": meta,
            "status": {"ready": True},
        }
    )


def test_summaries_are_found_by_profile_label_and_keyed_by_member() -> None:
    def summary(profile: str, cluster: str, *, uid: str = "uid-p", name: str | None = None) -> _Obj:
        meta = {
            "name": name or ss.summary_name(profile, cluster),
            "namespace": "fleet",
            "labels": {ss.PROFILE_LABEL: profile, ss.CLUSTER_LABEL: cluster},
            "ownerReferences": [
                {
                    "apiVersion": ss.OWNER_API_VERSION,
                    "kind": ss.OWNER_KIND,
                    "name": profile,
                    "uid": uid,
                    "controller": True,
                }
            ],
        }
        spec = {"clusterNamespace": "fleet", "clusterName": cluster}
        return _Obj({"apiVersion": "v", "kind": "ClusterSummary", "metadata": meta, "spec": spec})

    profile = _Obj({"apiVersion": "v", "kind": "ClusterProfile", "metadata": {"name": "p", "uid": "uid-p"}})
    cache = _Cache(
        {
            ("ClusterProfile", "p"): profile,
            ("ClusterSummary", "1"): summary("p", "a"),
            ("ClusterSummary", "2"): summary("q", "b"),
            # Hand-made look-alikes never count as deliveries: another owner, another name.
            ("ClusterSummary", "3"): summary("p", "c", uid="uid-other"),
            ("ClusterSummary", "4"): summary("p", "d", name="p-d-forged"),
        }
    )

    found = rollout_common.summaries_of(cache, "p")  # type: ignore[arg-type]

    assert list(found) == ["fleet/a"]


def test_annotations_hold_ignores_annotations_added_by_others() -> None:
    current = {"metadata": {"annotations": {"a": "1", "kubectl.kubernetes.io/last-applied": "{}"}}}
    assert rollout_common.annotations_hold(current, {"a": "1"})
    assert not rollout_common.annotations_hold(current, {"a": "2"})
    assert rollout_common.annotations_hold({"metadata": {}}, {})


async def test_a_pass_does_not_decide_from_a_cache_older_than_its_own_status_write() -> None:
    client, rollout = _Client(written_version="8"), _Fake()
    cache = _Cache({(KIND, "p"): _profile(), ("MemberCluster", "a"): _member("a")})
    ctx = _ctx(cache, client)
    await rollout_reconcile.reconcile(ctx, "p", rollout)
    assert rollout.log[-1] == "after_status"

    # Woken again before the informer shows version 8: acting now would replay an older record.
    rollout.log.clear()
    stale = await rollout_reconcile.reconcile(ctx, "p", rollout)
    assert rollout.log == []
    assert stale.requeue_after is not None
    assert stale.requeue_after > 0

    # Once the cache holds the write, passes go on as usual.
    cache.objects_[(KIND, "p")] = _profile(version="8")
    await rollout_reconcile.reconcile(ctx, "p", rollout)
    assert "act facts=42" in rollout.log


async def test_the_next_wake_is_counted_from_the_end_of_the_pass_not_its_start() -> None:
    """A pass under load lasts a second or more: a deadline counted from its start fired that much
    late."""

    async def requeue_after(pass_lasts: timedelta) -> float:
        clock = [T0]
        client = _Client()
        original = client.patch

        async def slow_patch(resource: Any, name: str, body: Any, **kw: Any) -> Any:
            clock[0] += pass_lasts  # the status write returns this much later
            return await original(resource, name, body, **kw)

        client.patch = slow_patch  # type: ignore[method-assign]
        cache = _Cache({(KIND, "p"): _profile(), ("MemberCluster", "a"): _member("a")})
        ctx = _ctx(cache, client, lambda: clock[0])
        result = await rollout_reconcile.reconcile(ctx, "p", _Fake())
        assert result.requeue_after is not None
        return result.requeue_after

    quick, slow = await requeue_after(timedelta(0)), await requeue_after(timedelta(seconds=0.8))
    assert quick > 1.0  # a deadline well after the pass
    assert abs((quick - slow) - 0.8) < 1e-6

"""A summary's verdict reaches the rollouts reading it while its status write is on its way, and only
for as long as the cache still holds the version it was decided from."""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace
from typing import Any

from fleetwave.api import families
from fleetwave.controllers import content, promotion, summary, summary_writes
from fleetwave.controllers import rollout_facts as rf
from fleetwave.controllers import summary_status as ss
from fleetwave.controllers.context import Context
from fleetwave.controllers.verdicts import Verdicts
from fleetwave.core import model as m

HASH = "a" * 64
READY = {"observedContentHash": HASH, "conditions": [{"type": "Ready", "status": "True", "reason": "Ready"}]}


def _summary(version: str = "7", status: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "fleetwave.io/v1alpha1",
        "kind": "ClusterSummary",
        "metadata": {
            "name": "web-m1",
            "namespace": "fleet",
            "uid": "u1",
            "resourceVersion": version,
            "annotations": {ss.CONTENT_HASH_ANNOTATION: HASH},
        },
        "status": status or {},
    }


def _obj(raw: dict[str, Any]) -> Any:
    meta = raw["metadata"]
    return SimpleNamespace(metadata=SimpleNamespace(**meta), raw=raw)


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_decided_status_is_read_while_the_cache_holds_the_version_it_was_decided_from() -> None:
    verdicts = Verdicts()
    cached = _summary()
    assert rf.delivery_of(cached, HASH).phase is m.DeliveryPhase.APPLYING  # memoised for version 7
    verdicts.record(_obj(cached), READY)
    decided = verdicts.overlay(cached)
    assert decided["status"] == READY
    assert "resourceVersion" not in decided["metadata"]  # the memo of version 7 does not answer for it
    assert rf.delivery_of(decided, HASH) == m.Delivery(m.DeliveryPhase.APPLIED, ready=True)


def test_once_the_cache_moves_on_it_is_the_truth_again() -> None:
    verdicts = Verdicts()
    verdicts.record(_obj(_summary("7")), READY)
    newer = _summary("8", status={"observedContentHash": "b" * 64})  # someone else's write landed
    assert verdicts.overlay(newer) is newer
    assert len(verdicts) == 0
    assert verdicts.overlay(_summary("7"))["status"] == {}  # not read back for the old version either


def test_a_write_not_seen_within_the_horizon_is_not_waited_for() -> None:
    clock = _Clock()
    verdicts = Verdicts(horizon=10.0, clock=clock)
    verdicts.record(_obj(_summary()), READY)
    clock.now += 10.5
    cached = _summary()
    assert verdicts.overlay(cached) is cached


def test_entries_nobody_reads_again_are_swept_after_the_horizon() -> None:
    clock = _Clock()
    verdicts = Verdicts(horizon=10.0, clock=clock)
    for i in range(50):
        raw = _summary()
        raw["metadata"]["name"] = f"web-m{i}"
        verdicts.record(_obj(raw), READY)
    clock.now += 11
    verdicts.record(_obj(_summary()), READY)
    assert len(verdicts) == 1


def test_recording_wakes_every_reader_with_the_summary() -> None:
    verdicts = Verdicts()
    woken: list[str] = []
    verdicts.readers.append(lambda s: woken.append(s.metadata.name))
    verdicts.record(_obj(_summary()), READY)
    assert woken == ["web-m1"]


def test_an_object_without_a_version_is_not_recorded() -> None:
    verdicts = Verdicts()
    woken: list[Any] = []
    verdicts.readers.append(woken.append)
    verdicts.record(_obj(_summary(version="")), READY)
    assert (len(verdicts), woken) == (0, [])


class _Ctx:
    def __init__(self) -> None:
        self.verdicts = Verdicts()
        self.woken: list[str] = []
        self.verdicts.readers.append(lambda s: self.woken.append(s.metadata.name))


def test_a_summary_pass_tells_readers_only_a_status_that_changes_what_they_read() -> None:
    ctx = _Ctx()
    cached = _summary()
    summary._tell_readers(ctx, _obj(cached), cached, READY, HASH)  # type: ignore[arg-type]
    assert ctx.woken == ["web-m1"]
    settled = _summary("9", status=READY)
    summary._tell_readers(ctx, _obj(settled), settled, dict(READY), HASH)  # type: ignore[arg-type]
    assert ctx.woken == ["web-m1"]  # the same verdict again: nobody is woken for it


class _Client:
    def __init__(self) -> None:
        self.applied: list[dict[str, Any]] = []

    async def apply(self, obj: Any, **_: Any) -> Any:
        self.applied.append(obj.to_dict() if hasattr(obj, "to_dict") else dict(obj))
        return SimpleNamespace(metadata=SimpleNamespace(resourceVersion="1"))


class _Body:
    def __init__(self, body: dict[str, Any]) -> None:
        self._body = body
        self.metadata = SimpleNamespace(**body["metadata"])

    def to_dict(self) -> dict[str, Any]:
        return self._body


class _Cache:
    family = families.NATIVE

    def __init__(self) -> None:
        self.profile = {
            "apiVersion": "fleetwave.io/v1alpha1",
            "kind": "ClusterProfile",
            # A uid of its own: specs are parsed once per object and version, across tests.
            "metadata": {"name": "promo-dev", "uid": "u-verdicts", "resourceVersion": "3", "generation": 1},
            "spec": {
                "clusterRefs": [{"namespace": "fleet", "name": "a"}],
                "policyRefs": [{"kind": "ConfigMap", "name": "content", "namespace": "fleetwave-system"}],
            },
        }
        self.summaries: list[dict[str, Any]] = []
        self.member = {"metadata": {"name": "a", "namespace": "fleet"}, "status": {"ready": True}}

    def list(self, kind: str) -> list[dict[str, Any]]:
        return [self.member] if kind == "MemberCluster" else []

    def get(self, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        return self.profile if kind == "ClusterProfile" else None

    def labelled(self, kind: str, label: str, value: str) -> list[dict[str, Any]]:
        return self.summaries if kind == "ClusterSummary" else []

    def memo(self, name: str, kind: str, build: Any, *, everywhere: bool = False) -> Any:
        return build()


async def test_a_promotion_judges_its_stage_on_a_verdict_whose_write_is_on_its_way() -> None:
    client, cache = _Client(), _Cache()
    ctx = Context(
        client=client,  # type: ignore[arg-type]
        cache=cache,  # type: ignore[arg-type]
        recorder=None,  # type: ignore[arg-type]
        helm=None,  # type: ignore[arg-type]
        health=None,  # type: ignore[arg-type]
        namespace="fleetwave-system",
        clock=lambda: dt.datetime(2026, 11, 27, tzinfo=dt.UTC),
    )
    resolved = content.Resolved(hash=HASH, body={})
    assert await summary_writes.write_ahead(ctx, _Body(cache.profile), resolved, ["fleet/a"])
    written = client.applied[0]  # the summary as the profile makes it
    cached = {**written, "metadata": {**written["metadata"], "uid": "s-1", "resourceVersion": "5"}}
    cache.summaries = [cached]
    run = SimpleNamespace(
        key="promo",
        previous=SimpleNamespace(rollback=None, stages=[SimpleNamespace(name="dev", clusters=("fleet/a",))]),
        resolved=resolved,
        fleet=SimpleNamespace(names={"fleet/a"}),
    )
    assert promotion._deliveries(ctx, run, [])["fleet/a"].phase is m.DeliveryPhase.APPLYING  # type: ignore[arg-type]
    ctx.verdicts.record(_obj(cached), READY)
    ready = m.Delivery(m.DeliveryPhase.APPLIED, ready=True)
    assert promotion._deliveries(ctx, run, [])["fleet/a"] == ready  # type: ignore[arg-type]
    # The write is refused and a newer version comes in: what the cache says counts again.
    cache.summaries = [{**cached, "metadata": {**cached["metadata"], "resourceVersion": "6"}}]
    assert promotion._deliveries(ctx, run, [])["fleet/a"].phase is m.DeliveryPhase.APPLYING  # type: ignore[arg-type]

"""A readiness judgement judges again on what it saw and what the member watch delivered since,
while that is fresh, instead of reading every object again (ADR 0068, addendum bf5b632)."""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from types import SimpleNamespace
from typing import Any

from fleetwave.controllers.fleet.member_watches import Interest, MemberWatches
from fleetwave.controllers.fleet.ports import HealthAdapter
from fleetwave.controllers.fleet.sightings import Sightings
from fleetwave.controllers.shared.context import Wake
from fleetwave.delivery.target import MemberTarget, MemberUnreachable

NS = ("v1", "Namespace", None, "web")
DEPLOY = ("apps/v1", "Deployment", "web", "web")
IDS = [NS, DEPLOY]
NAMESPACE = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "web", "resourceVersion": "5"}}


def deployment(version: int, *, ready: bool, uid: str = "u1", namespace: str = "web") -> dict[str, Any]:
    status: dict[str, Any] = {"observedGeneration": 2, "replicas": 1, "updatedReplicas": 1}
    if ready:
        status |= {"availableReplicas": 1, "readyReplicas": 1}
        status["conditions"] = [{"type": "Available", "status": "True"}]
    meta = {
        "name": "web",
        "namespace": namespace,
        "generation": 2,
        "uid": uid,
        "resourceVersion": str(version),
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta,
        "spec": {"replicas": 1},
        "status": status,
    }


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_what_was_seen_stands_in_for_a_read_while_it_is_fresh() -> None:
    clock = Clock()
    s = Sightings(fresh_seconds=1.0, clock=clock)
    s.remember("k", IDS, {NS: NAMESPACE, DEPLOY: deployment(10, ready=False)})
    assert set(s.usable("k", IDS)) == {NS, DEPLOY}
    assert s.usable("other", IDS) == {}
    clock.now += 1.5
    assert s.usable("k", IDS) == {}  # a slower rollout reads again


def test_a_watched_object_replaces_the_sighting_only_when_it_is_later() -> None:
    clock = Clock()
    s = Sightings(clock=clock)
    s.remember("k", IDS, {NS: NAMESPACE, DEPLOY: deployment(10, ready=False)})
    s.note("k", deployment(9, ready=True))  # still in flight from before the apply
    assert s.usable("k", IDS)[DEPLOY]["metadata"]["resourceVersion"] == "10"
    s.note("k", deployment(12, ready=True))
    assert s.usable("k", IDS)[DEPLOY]["metadata"]["resourceVersion"] == "12"
    s.note("k", deployment(13, ready=True, namespace="other"))  # another object of the kind
    assert s.usable("k", IDS)[DEPLOY]["metadata"]["resourceVersion"] == "12"


def test_a_watched_object_that_cannot_be_ordered_makes_the_next_judgement_read_it() -> None:
    s = Sightings(clock=Clock())
    s.remember("k", IDS, {NS: NAMESPACE, DEPLOY: deployment(10, ready=False)})
    s.note("k", deployment(20, ready=True, uid="u2"))  # deleted and created again
    assert set(s.usable("k", IDS)) == {NS}
    s.remember("k", IDS, {DEPLOY: {**deployment(10, ready=False), "metadata": {"name": "web"}}})
    s.note("k", deployment(11, ready=True))  # no version to compare with
    assert set(s.usable("k", IDS)) == {NS}


def test_a_change_the_watch_cannot_name_forgets_everything() -> None:
    s = Sightings(clock=Clock())
    s.remember("k", IDS, {NS: NAMESPACE, DEPLOY: deployment(10, ready=False)})
    s.note("k", None)
    assert s.usable("k", IDS) == {}
    s.note("k", deployment(12, ready=True))  # nothing to follow any more: not taken
    assert s.usable("k", IDS) == {}


def test_judging_on_a_sighting_does_not_renew_it() -> None:
    clock = Clock()
    s = Sightings(fresh_seconds=1.0, clock=clock)
    s.remember("k", IDS, {NS: NAMESPACE, DEPLOY: deployment(10, ready=False)})
    clock.now += 0.8
    s.note("k", deployment(12, ready=False))
    s.remember("k", IDS, {})  # judged on both sightings, read nothing
    clock.now += 0.5
    assert set(s.usable("k", IDS)) == {DEPLOY}  # the namespace was seen 1.3 s ago: read again


def test_an_absent_object_is_not_remembered_and_an_unplaced_id_matches_the_default_namespace() -> None:
    s = Sightings(clock=Clock())
    unplaced = ("apps/v1", "Deployment", None, "web")
    s.remember("k", [NS, unplaced], {NS: None, unplaced: deployment(10, ready=False, namespace="default")})
    assert set(s.usable("k", [NS, unplaced])) == {unplaced}
    s.note("k", deployment(11, ready=True, namespace="default"))
    assert s.usable("k", [NS, unplaced])[unplaced]["metadata"]["resourceVersion"] == "11"


def test_sightings_of_judgements_long_stale_are_swept() -> None:
    clock = Clock()
    s = Sightings(fresh_seconds=1.0, clock=clock)
    for i in range(600):
        s.remember(i, IDS, {NS: NAMESPACE})
    clock.now += 2
    for i in range(600, 1100):
        s.remember(i, IDS, {NS: NAMESPACE})
    assert len(s) == 500  # the 600 stale ones went when the map passed twice its bound
    assert all(s.usable(i, IDS) for i in range(600, 1100))


class Streams:
    def __init__(self) -> None:
        self.changed: dict[Interest, Any] = {}

    async def run(self, target: MemberTarget, interest: Interest, changed: Any) -> None:
        self.changed[interest] = changed
        await asyncio.Event().wait()


class Silent(MemberTarget):
    """A member that answers nothing: every read fails, and says how many were tried."""

    opened = 0

    @asynccontextmanager
    async def session(self) -> Any:  # type: ignore[override]
        type(self).opened += 1
        raise MemberUnreachable(self.name, "connection refused")
        yield


def _judging() -> tuple[Streams, MemberWatches, HealthAdapter, Silent]:
    """Judgements through a HealthAdapter, its member watch streams driven by the test."""
    streams = Streams()
    watches = MemberWatches(stream=streams.run)
    pool = SimpleNamespace(budget=SimpleNamespace(wall_seconds=5.0))
    Silent.opened = 0
    return streams, watches, HealthAdapter(pool, watches), Silent("m1", b"kubeconfig")  # type: ignore[arg-type]


async def test_a_judgement_woken_by_the_watch_judges_on_what_it_delivered_without_reading() -> None:
    streams, watches, health, member = _judging()
    woken: list[str] = []
    wake = Wake("summary", lambda: woken.append("summary"))
    applied = {NS: NAMESPACE, DEPLOY: deployment(10, ready=False)}

    first = await health.check(member, [], objects=IDS, wake=wake, seen=applied, delivered=True)
    assert not first.ok
    assert member.opened == 0
    await asyncio.sleep(0)
    changed = streams.changed[Interest("apps/v1", "Deployment", "web")]
    changed(deployment(11, ready=False))
    assert woken == []  # a step on the way
    changed(deployment(12, ready=True))
    assert woken == ["summary"]
    assert (await health.check(member, [], objects=IDS, wake=wake)).ok
    assert member.opened == 0  # no read: the watch delivered it

    again = await health.check(member, [], objects=IDS, wake=wake, seen=applied, delivered=True)
    assert not again.ok
    await asyncio.sleep(0)
    streams.changed[Interest("apps/v1", "Deployment", "web")]()  # a deletion: what is gone is not known
    verdict = await health.check(member, [], objects=IDS, wake=wake)
    assert not verdict.ok
    assert "unreachable" in verdict.message
    assert member.opened == 1
    await watches.close()


async def test_a_delivery_makes_earlier_sightings_void() -> None:
    streams, watches, health, member = _judging()
    wake = Wake("summary", lambda: None)
    await health.check(
        member, [], objects=IDS, wake=wake, seen={NS: NAMESPACE, DEPLOY: deployment(10, ready=False)}
    )
    await asyncio.sleep(0)
    streams.changed[Interest("apps/v1", "Deployment", "web")](deployment(12, ready=True))
    # A new revision is applied (a chart installed too, so the applies are not handed over):
    verdict = await health.check(member, [], objects=IDS, wake=wake, delivered=True)
    assert not verdict.ok
    assert member.opened == 1
    await watches.close()

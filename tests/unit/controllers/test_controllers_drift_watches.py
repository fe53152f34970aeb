"""Drift noticed through member watches (ADR 0114): which streams a summary's deployed objects need
(per kind and namespace, bounded), and which changes wake it (the streams are stand-ins here;
tests/integration/test_drift_detection.py runs real ones)."""

from __future__ import annotations

import asyncio
from typing import Any

from fleetwave.controllers.fleet.drift_watches import DriftWatches, plan
from fleetwave.controllers.fleet.member_watches import Interest, MemberWatches
from fleetwave.delivery.target import MemberTarget

CM = Interest("v1", "ConfigMap", "apps")
DEPLOY = Interest("apps/v1", "Deployment", "apps")


class Streams:
    """Records each stream started; a test fires a change (an object, or None) on it."""

    def __init__(self) -> None:
        self.changed: dict[Interest, Any] = {}

    async def run(self, target: MemberTarget, interest: Interest, changed: Any) -> None:
        self.changed[interest] = changed
        await asyncio.Event().wait()


def _cm(name: str, data: str, *, status: str = "", namespace: str = "apps") -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "resourceVersion": data + status},
        "data": {"k": data},
    }
    if status:
        obj["status"] = {"seen": status}
    return obj


def test_streams_are_per_kind_and_namespace_never_per_object() -> None:
    objects = [("v1", "ConfigMap", "apps", f"c{i}") for i in range(50)]
    objects += [("apps/v1", "Deployment", "apps", "web"), ("apps/v1", "Deployment", "apps", "api")]
    assert plan(objects) == [DEPLOY, CM]


def test_too_many_namespaces_watch_the_kind_everywhere_and_past_that_nothing() -> None:
    spread = [("v1", "ConfigMap", f"ns{i}", "c") for i in range(9)]
    assert plan(spread, limit=8) == [Interest("v1", "ConfigMap", None)]
    assert plan(spread, limit=8, everywhere=False) is None  # a tenant admin lists its namespaces only
    kinds = [("example.io/v1", f"Kind{i}", f"ns{i}", "x") for i in range(9)]
    assert plan(kinds, limit=8) is None


async def test_a_change_of_a_deployed_object_wakes_status_and_other_objects_do_not() -> None:
    streams = Streams()
    drift = DriftWatches(MemberWatches(stream=streams.run))
    woken: list[str] = []
    watched = drift.follow(
        MemberTarget("m1", b"k"), "s", [("v1", "ConfigMap", "apps", "ours")], lambda: woken.append("s")
    )
    await asyncio.sleep(0)
    assert watched
    assert drift.watched("s")
    changed = streams.changed[CM]
    changed(_cm("other", "x"))
    assert woken == []
    changed(_cm("ours", "edited"))
    assert woken == ["s"]
    changed(_cm("ours", "edited", status="ready"))  # status and resourceVersion only: no drift
    assert woken == ["s"]
    changed(_cm("ours", "restored"))
    changed(None)  # a deletion or a new list: what changed is not known
    assert woken == ["s", "s", "s"]
    drift.forget("s")
    assert not drift.watched("s")
    changed(_cm("ours", "again"))
    assert woken == ["s", "s", "s"]
    await drift.watches.close()


async def test_content_without_a_namespace_matches_the_namespace_it_was_deployed_to() -> None:
    streams = Streams()
    drift = DriftWatches(MemberWatches(stream=streams.run))
    woken: list[str] = []
    drift.follow(
        MemberTarget("m1", b"k"), "s", [("v1", "ConfigMap", None, "ours")], lambda: woken.append("s")
    )
    await asyncio.sleep(0)
    streams.changed[Interest("v1", "ConfigMap", None)](_cm("ours", "edited", namespace="default"))
    assert woken == ["s"]
    await drift.watches.close()


async def test_past_the_members_bound_a_summary_is_not_watched_and_its_caller_polls() -> None:
    streams = Streams()
    drift = DriftWatches(MemberWatches(per_member=1, stream=streams.run))
    objects = [("v1", "ConfigMap", "apps", "a"), ("apps/v1", "Deployment", "apps", "b")]
    assert not drift.follow(MemberTarget("m1", b"k"), "s", objects, lambda: None)
    assert not drift.watched("s")
    assert drift.follow(MemberTarget("m1", b"k"), "s", objects[:1], lambda: None)  # within the bound
    assert drift.watched("s")
    await drift.watches.close()

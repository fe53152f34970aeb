"""The ports one controller wakes another through (ADR 0102): the work queues by kind behind
`Context.wake`, and the wake-ups left for a ClusterProfile's next event."""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace

import pytest

from fleetwave.api import families
from fleetwave.controllers.shared.context import Context
from fleetwave.controllers.shared.keys import SummaryKey
from fleetwave.controllers.shared.wakeups import Queues, Wakeups


def _ctx() -> Context:
    return Context(
        client=None,  # type: ignore[arg-type]
        cache=SimpleNamespace(family=families.NATIVE),  # type: ignore[arg-type]
        recorder=None,  # type: ignore[arg-type]
        helm=None,  # type: ignore[arg-type]
        health=None,  # type: ignore[arg-type]
        namespace="fleetwave-system",
        clock=lambda: dt.datetime(2026, 11, 26, tzinfo=dt.UTC),
    )


def test_a_wake_enqueues_the_key_on_its_kinds_queue_once_the_controllers_are_wired() -> None:
    ctx = _ctx()
    assert ctx.wake("ClusterProfile", "web-dev") is None  # before the composition root wires it
    profiles: list[str] = []
    summaries: list[str] = []
    ctx.queues.add("ClusterProfile", profiles.append)
    ctx.queues.add("ClusterSummary", summaries.append)
    wake = ctx.wake("ClusterProfile", "web-dev")
    assert wake is not None
    assert wake.key == ("clusterprofile", "web-dev")  # the controller's name and the key
    assert (profiles, summaries) == ([], [])  # nothing until it is called
    wake.call()
    assert (profiles, summaries) == (["web-dev"], [])
    assert ctx.wake("ClusterPromotion", "web") is None  # a kind nobody wired


def test_a_kinds_queue_is_wired_once() -> None:
    queues = Queues()
    queues.add("ClusterSummary", lambda _key: None)
    with pytest.raises(ValueError, match="ClusterSummary"):
        queues.add("ClusterSummary", lambda _key: None)


def test_each_context_has_its_own_queues_and_wakeups() -> None:
    one, other = _ctx(), _ctx()
    one.queues.add("ClusterProfile", lambda _key: None)
    one.wakeups.expect_version("web-dev", "8")
    assert other.queues.of("ClusterProfile") is None
    assert not other.wakeups.arrived("web-dev", "8")


def test_only_the_version_a_promotion_wrote_arrives_and_only_once() -> None:
    wakeups = Wakeups()
    assert not wakeups.arrived("web-dev", "8")  # nothing expected
    wakeups.expect_version("web-dev", "8")
    assert not wakeups.arrived("web-dev", "7")  # an older version is an ordinary change
    assert not wakeups.arrived("web-dev", None)
    assert not wakeups.arrived("web-prod", "8")  # another profile
    assert wakeups.arrived("web-dev", "8")
    assert not wakeups.arrived("web-dev", "8")  # once
    wakeups.expect_version("web-dev", "9")
    wakeups.expect_version("web-dev", "10")  # the promotion wrote again: the last write counts
    assert not wakeups.arrived("web-dev", "9")
    assert wakeups.arrived("web-dev", "10")


def test_summaries_waiting_on_a_profile_are_handed_over_once_in_key_order() -> None:
    wakeups = Wakeups()
    b, a, other = SummaryKey("fleet", "web-b"), SummaryKey("fleet", "web-a"), SummaryKey("fleet", "db-a")
    wakeups.await_profile("web", b)
    wakeups.await_profile("web", a)
    wakeups.await_profile("web", a)  # waiting twice is waiting once
    wakeups.await_profile("db", other)
    assert wakeups.take_waiting("web") == [a, b]
    assert wakeups.take_waiting("web") == []  # handed over: the next event wakes nobody
    assert wakeups.take_waiting("db") == [other]


def test_waiting_summaries_are_ordered_as_their_work_queue_keys() -> None:
    # "a-b/x" sorts before "a/x" as a key, though ("a", "x") sorts before ("a-b", "x") as a pair.
    wakeups = Wakeups()
    wakeups.await_profile("web", SummaryKey("a", "x"))
    wakeups.await_profile("web", SummaryKey("a-b", "x"))
    assert [s.key for s in wakeups.take_waiting("web")] == ["a-b/x", "a/x"]


def test_a_summary_key_is_its_work_queue_key() -> None:
    key = SummaryKey.parse("fleet/web-m1")
    assert key == SummaryKey("fleet", "web-m1")
    assert key.key == "fleet/web-m1"
    assert SummaryKey.of({"metadata": {"namespace": "fleet", "name": "web-m1"}}) == key

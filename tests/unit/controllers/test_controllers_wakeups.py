"""The ports one controller wakes another through (ADR 0102): the work queues by kind behind
`Context.wake`, and the wake-ups left for a ClusterProfile's next event."""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace

import pytest

from fleetwave.api import families
from fleetwave.controllers.shared.context import Context
from fleetwave.controllers.shared.keys import SummaryKey
from fleetwave.controllers.shared.wakeups import UNSEEN_CREATION_TRUSTED, Queues, Wakeups


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


def _profile(version: str, uid: str = "uid-1", refs: tuple[str, ...] = ()) -> dict[str, object]:
    return {
        "metadata": {"name": "web-dev", "uid": uid, "resourceVersion": version},
        "spec": {"clusterRefs": [{"name": r} for r in refs]},
    }


def test_a_stage_profile_is_judged_as_written_until_its_watch_shows_that_version() -> None:
    wakeups = Wakeups()
    cached = _profile("10", refs=("c1",))
    written = _profile("12", refs=("c1", "c2"))
    assert wakeups.as_written("web-dev", cached) is cached  # nothing written by a promotion yet
    wakeups.profile_written("web-dev", written)
    assert wakeups.as_written("web-dev", cached) is written  # the cache is behind the write
    # An older event of it (someone else's write before ours) does not end it.
    wakeups.profile_event("web-dev", "11")
    assert wakeups.as_written("web-dev", _profile("11")) is written
    wakeups.profile_event("web-dev", "12")  # the watch has caught up: the cache is the truth again
    assert wakeups.as_written("web-dev", cached) is cached


@pytest.mark.parametrize(
    "cached",
    [
        _profile("14"),  # the cache is ahead of the write
        _profile("12"),  # the cache shows the very version written
        _profile("15", uid="uid-2"),  # deleted and created again: another object
        _profile("abc"),  # a version that is not etcd's integer: no order is assumed
    ],
)
def test_the_cache_is_used_when_the_write_is_not_a_later_version_of_the_same_profile(
    cached: dict[str, object],
) -> None:
    wakeups = Wakeups()
    wakeups.profile_written("web-dev", _profile("12", refs=("c1", "c2")))
    assert wakeups.as_written("web-dev", cached) is cached


def test_a_created_profile_stands_as_written_until_its_watch_shows_it_or_the_bound_passes() -> None:
    """Its summaries are written once the creation returns; the cache may not show it yet."""
    now = [100.0]
    wakeups = Wakeups(clock=lambda: now[0])
    assert wakeups.as_written("web-dev", None) is None  # nothing written: not in the cache, no profile
    created = _profile("12", refs=("c1",))
    wakeups.profile_written("web-dev", created)
    now[0] += UNSEEN_CREATION_TRUSTED - 1
    assert wakeups.as_written("web-dev", None) is created
    now[0] += 1  # never shown by its watch (deleted across a relist): the write no longer stands in
    assert wakeups.as_written("web-dev", None) is None


def test_a_deletion_the_watch_shows_ends_what_a_promotion_wrote_of_the_profile() -> None:
    wakeups = Wakeups(clock=lambda: 100.0)
    wakeups.profile_written("web-dev", _profile("12", refs=("c1",)))
    wakeups.profile_event("web-dev", "13")  # its deletion, at a later version
    assert wakeups.as_written("web-dev", None) is None


def test_summaries_waiting_on_a_profile_are_handed_over_when_a_promotion_s_write_of_it_returns() -> None:
    wakeups = Wakeups()
    waiting = SummaryKey.parse("fleetwave-system/web-dev-sveltos-c2")
    wakeups.await_profile("web-dev", waiting)
    assert wakeups.profile_written("web-dev", _profile("12")) == [waiting]
    assert wakeups.profile_event("web-dev", "12") == []  # handed over once

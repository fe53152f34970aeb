"""A reconcile must not act on a cached object older than its own last status write."""

from __future__ import annotations

from fleetwave.controllers.shared.own_writes import OwnWrites


def test_the_cache_is_behind_until_it_shows_the_written_version_or_a_newer_one() -> None:
    writes = OwnWrites()
    writes.record("k", "120")
    assert writes.behind("k", "119")
    assert writes.behind("k", None)
    assert not writes.behind("k", "120")
    assert not writes.behind("k", "119")  # caught up once: forgotten


def test_a_newer_version_than_written_counts_as_caught_up() -> None:
    writes = OwnWrites()
    writes.record("k", "120")
    assert not writes.behind("k", "121")


def test_opaque_versions_compare_only_for_equality() -> None:
    writes = OwnWrites()
    writes.record("k", "abc")
    assert writes.behind("k", "abd")
    assert not writes.behind("k", "abc")


def test_an_old_write_is_trusted_no_longer_and_other_keys_are_unaffected() -> None:
    now = [0.0]
    writes = OwnWrites(horizon=10, clock=lambda: now[0])
    writes.record("k", "120")
    assert not writes.behind("other", "1")
    assert writes.behind("k", "100")
    now[0] = 11.0
    assert not writes.behind("k", "100")


def test_a_write_without_a_version_records_nothing() -> None:
    writes = OwnWrites()
    writes.record("k", None)
    assert not writes.behind("k", "1")


def test_a_reconcile_put_off_is_woken_once_when_the_cache_shows_the_write() -> None:
    writes = OwnWrites()
    writes.record("k", "120")
    assert not writes.caught_up("k", "120")  # nobody was put off: nothing to wake
    assert writes.behind("k", "119")  # a reconcile is put off
    assert not writes.caught_up("k", "119")  # the cache has not moved yet
    assert writes.caught_up("k", "120")
    assert not writes.caught_up("k", "121")  # woken once only


def test_a_newer_cached_version_wakes_a_put_off_reconcile_and_an_expired_write_forgets_it() -> None:
    now = [0.0]
    writes = OwnWrites(horizon=10, clock=lambda: now[0])
    writes.record("k", "120")
    assert writes.behind("k", "100")
    assert writes.caught_up("k", "125")
    writes.record("j", "7")
    assert writes.behind("j", "6")
    now[0] = 11.0
    assert not writes.behind("j", "6")  # trusted no longer: the reconcile goes on by itself
    assert not writes.caught_up("j", "7")

"""Echoes: the event of a controller's own write does not wake that controller; every other event
does, at once or, while a write of the object is in flight, as soon as it returns."""

from __future__ import annotations

import asyncio

import pytest

from fleetwave.controllers.shared.echoes import Echoes, tracked

KEY = ("ClusterSummary", "ns/s")


class Wakes:
    def __init__(self) -> None:
        self.count = 0

    def __call__(self) -> None:
        self.count += 1


def test_an_event_with_no_write_in_flight_or_remembered_is_not_taken() -> None:
    wake = Wakes()
    assert not Echoes().arrived(KEY, "ClusterProfile", "3", wake)
    assert wake.count == 0


def test_a_failed_write_lets_every_held_event_through() -> None:
    echoes, wake = Echoes(), Wakes()
    echoes.begin(KEY, "ClusterProfile")
    assert echoes.arrived(KEY, "ClusterProfile", "3", wake)
    assert echoes.arrived(KEY, "ClusterProfile", "4", wake)
    echoes.end(KEY, "ClusterProfile", None)
    assert wake.count == 2


def test_writers_and_objects_are_told_apart() -> None:
    echoes, wake = Echoes(), Wakes()
    echoes.begin(KEY, "ClusterProfile")
    echoes.end(KEY, "ClusterProfile", "5")
    assert not echoes.arrived(KEY, "ClusterSummary", "5", wake)  # the summary controller did not write it
    assert not echoes.arrived(("ClusterSummary", "ns/other"), "ClusterProfile", "5", wake)
    assert echoes.arrived(KEY, "ClusterProfile", "5", wake)
    assert not echoes.arrived(KEY, "ClusterProfile", "5", wake)  # an echo is dropped once


def test_two_writes_in_flight_resolve_their_held_events_when_the_last_returns() -> None:
    echoes, wake = Echoes(), Wakes()
    echoes.begin(KEY, "ClusterProfile")
    echoes.begin(KEY, "ClusterProfile")
    assert echoes.arrived(KEY, "ClusterProfile", "6", wake)
    assert echoes.arrived(KEY, "ClusterProfile", "9", wake)  # someone else's, between ours
    echoes.end(KEY, "ClusterProfile", "6")
    assert wake.count == 0  # still held: the other write is in flight
    echoes.end(KEY, "ClusterProfile", "7")
    assert wake.count == 1  # 6 was ours; 9 was not
    assert echoes.arrived(KEY, "ClusterProfile", "7", wake)  # ours, its event late


def test_a_remembered_write_older_than_the_horizon_is_not_trusted() -> None:
    now = [100.0]
    echoes, wake = Echoes(horizon=10.0, clock=lambda: now[0]), Wakes()
    echoes.begin(KEY, "ClusterProfile")
    echoes.end(KEY, "ClusterProfile", "8")
    now[0] += 11
    assert not echoes.arrived(KEY, "ClusterProfile", "8", wake)


async def test_tracked_ends_the_write_whatever_happens() -> None:
    echoes, wake = Echoes(), Wakes()

    async def refused() -> str:
        assert echoes.arrived(KEY, "ClusterProfile", "2", wake)  # held while in flight
        raise RuntimeError("409")

    with pytest.raises(RuntimeError):
        await tracked(echoes, KEY, "ClusterProfile", refused(), lambda v: v)
    assert wake.count == 1

    async def accepted() -> str:
        await asyncio.sleep(0)
        return "3"

    assert await tracked(echoes, KEY, "ClusterProfile", accepted(), lambda v: v) == "3"
    assert echoes.arrived(KEY, "ClusterProfile", "3", wake)

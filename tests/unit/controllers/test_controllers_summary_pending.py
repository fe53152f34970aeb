"""The status of a revision applied whose health is pending, kept unwritten (ADR 0130)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from fleetwave.controllers.shared.keys import SummaryKey
from fleetwave.controllers.sveltos.summary_memory import SummaryMemory
from fleetwave.controllers.sveltos.summary_pending import UNWRITTEN_FOR, PendingStatuses

T0 = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
KEY = SummaryKey("fleet", "web-m1")
APPLIED = {"observedContentHash": "h2", "conditions": [{"type": "Ready", "reason": "Unhealthy"}]}


def _raw(version: str) -> dict[str, Any]:
    return {"metadata": {"namespace": "fleet", "name": "web-m1", "resourceVersion": version}}


class _Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


def test_a_held_status_stands_for_the_version_and_revision_it_was_decided_from() -> None:
    pending = PendingStatuses(_Clock())
    assert pending.hold(KEY, _raw("7"), "h2", APPLIED) == UNWRITTEN_FOR
    assert pending.status_of(KEY, _raw("7"), "h2") == APPLIED
    assert pending.status_of(KEY, _raw("7"), "h3") is None  # a newer revision is wanted now
    assert pending.status_of(KEY, _raw("7"), "h2") is None  # and what was kept is dropped


def test_any_other_version_of_the_summary_drops_it() -> None:
    pending = PendingStatuses(_Clock())
    pending.hold(KEY, _raw("7"), "h2", APPLIED)
    assert pending.status_of(KEY, _raw("8"), "h2") is None  # a spec edit, another writer's status
    assert pending.status_of(KEY, _raw("7"), "h2") is None
    assert len(pending) == 0


def test_it_is_held_at_most_the_hold_counted_from_the_first_pass() -> None:
    clock = _Clock()
    pending = PendingStatuses(clock)
    pending.hold(KEY, _raw("7"), "h2", APPLIED)
    clock.now = T0 + timedelta(seconds=2)
    later = {**APPLIED, "message": "0 of 1 available"}
    assert pending.hold(KEY, _raw("7"), "h2", later) == UNWRITTEN_FOR - 2  # not restarted
    assert pending.status_of(KEY, _raw("7"), "h2") == later
    clock.now = T0 + timedelta(seconds=UNWRITTEN_FOR)
    assert pending.hold(KEY, _raw("7"), "h2", later) == 0.0  # due: written now
    assert pending.status_of(KEY, _raw("7"), "h2") is None


def test_a_hold_for_a_new_version_starts_afresh() -> None:
    clock = _Clock()
    pending = PendingStatuses(clock)
    pending.hold(KEY, _raw("7"), "h2", APPLIED)
    clock.now = T0 + timedelta(seconds=UNWRITTEN_FOR - 1)
    assert pending.hold(KEY, _raw("9"), "h3", APPLIED) == UNWRITTEN_FOR


def test_the_summary_memory_lets_go_of_it_when_the_summary_goes_or_a_shard_is_taken_over() -> None:
    memory = SummaryMemory(clock=_Clock())
    memory.pending.hold(KEY, _raw("7"), "h2", APPLIED)
    memory.forget(KEY)
    assert memory.pending.status_of(KEY, _raw("7"), "h2") is None
    memory.pending.hold(KEY, _raw("7"), "h2", APPLIED)
    memory.forget_prunes()  # another replica may have delivered and written since
    assert memory.pending.status_of(KEY, _raw("7"), "h2") is None

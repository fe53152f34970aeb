"""What the ClusterSummary controller remembers of its own deliveries between passes (ADR 0102):
the credentials each summary was delivered with and what its inventory was pruned down to, kept per
summary, forgotten with the summary, and the prunes forgotten when a shard is taken over."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from fleetwave.controllers import app
from fleetwave.controllers.shared import first_deliveries
from fleetwave.controllers.shared.keys import SummaryKey
from fleetwave.controllers.sveltos.summary_memory import SummaryMemory

WEB, DB = SummaryKey("fleet", "web-m1"), SummaryKey("fleet", "db-m1")
PRUNED = ("fingerprint", frozenset[object]({"ConfigMap"}))


def test_a_summary_counts_as_delivered_only_with_the_credentials_it_was_delivered_with() -> None:
    memory = SummaryMemory()
    assert not memory.delivered_with(WEB, "creds-1")  # a new process has delivered nothing
    memory.delivered(WEB, "creds-1")
    assert memory.delivered_with(WEB, "creds-1")
    assert not memory.delivered_with(WEB, "creds-2")  # rotated, or a rebuilt cluster
    assert not memory.delivered_with(DB, "creds-1")  # another summary
    memory.delivered(WEB, "creds-2")
    assert memory.delivered_with(WEB, "creds-2")
    assert not memory.delivered_with(WEB, "creds-1")


def test_a_summary_gone_is_forgotten_and_the_others_are_kept() -> None:
    memory = SummaryMemory()
    for key in (WEB, DB):
        memory.delivered(key, "creds")
        memory.prunes[key] = PRUNED
    memory.forget(WEB)
    assert not memory.delivered_with(WEB, "creds")
    assert WEB not in memory.prunes
    assert memory.delivered_with(DB, "creds")
    assert memory.prunes[DB] == PRUNED


def test_a_shard_taken_over_forgets_the_prunes_but_not_the_deliveries() -> None:
    handlers: list[Any] = []
    manager: Any = SimpleNamespace(shards=SimpleNamespace(on_gain=handlers.append))
    memory = app._summary_memory(manager)
    memory.delivered(WEB, "creds")
    memory.prunes[WEB] = PRUNED
    (gained,) = handlers
    gained(3)
    assert memory.prunes == {}
    assert memory.delivered_with(WEB, "creds")


class _Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def _memory_alone_since_noon() -> tuple[SummaryMemory, _Clock]:
    clock = _Clock()
    memory = SummaryMemory(clock)
    assert not memory.first_alone(SummaryKey("fleet", "warm-up"), None)  # alone from 12:00:00
    return memory, clock


def test_only_a_summary_created_after_this_process_began_delivering_alone_counts_as_never_delivered() -> None:
    memory, _ = _memory_alone_since_noon()
    later = datetime(2026, 11, 29, 12, 0, 10, tzinfo=UTC)
    assert memory.first_alone(WEB, later)
    assert not memory.first_alone(WEB, later)  # begun once: what it left may need a search
    assert not memory.first_alone(DB, datetime(2026, 11, 29, 11, 59, tzinfo=UTC))  # created before
    # Within the margin the API server's clock may be ahead of ours: searched.
    within = SummaryKey("fleet", "within")
    assert not memory.first_alone(within, datetime(2026, 11, 29, 12, 0, 4, tzinfo=UTC))
    assert not memory.first_alone(SummaryKey("fleet", "no-timestamp"), None)


def test_a_summary_seen_deleted_is_searched_when_created_again() -> None:
    memory, _ = _memory_alone_since_noon()
    later = datetime(2026, 11, 29, 12, 1, tzinfo=UTC)
    assert memory.first_alone(WEB, later)
    memory.forget(WEB)  # its cluster may have been unreachable when its content was to be removed
    assert not memory.first_alone(WEB, later + timedelta(minutes=1))


def test_a_shard_taken_over_makes_every_summary_created_until_then_searched() -> None:
    memory, clock = _memory_alone_since_noon()
    clock.now = datetime(2026, 11, 29, 13, 0, tzinfo=UTC)
    memory.forget_prunes()  # another replica delivered this shard until 13:00
    assert not memory.first_alone(WEB, datetime(2026, 11, 29, 12, 30, tzinfo=UTC))
    assert memory.first_alone(DB, datetime(2026, 11, 29, 13, 0, 6, tzinfo=UTC))


def test_too_many_deleted_summaries_to_remember_move_the_alone_time_instead(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(first_deliveries, "MAX_GONE", 2)
    memory, clock = _memory_alone_since_noon()
    clock.now = datetime(2026, 11, 29, 14, 0, tzinfo=UTC)
    for name in ("a", "b", "c"):
        memory.forget(SummaryKey("fleet", name))
    # Deletions are no longer told apart: whatever was created before 14:00 is searched.
    assert not memory.first_alone(SummaryKey("fleet", "a"), datetime(2026, 11, 29, 13, 0, tzinfo=UTC))
    assert not memory.first_alone(
        SummaryKey("fleet", "never-deleted"), datetime(2026, 11, 29, 13, 30, tzinfo=UTC)
    )
    assert memory.first_alone(WEB, datetime(2026, 11, 29, 14, 0, 5, tzinfo=UTC))


def test_alone_since_is_when_the_controllers_began_when_that_is_known() -> None:
    clock, began = _Clock(), datetime(2026, 11, 29, 11, 0, tzinfo=UTC)
    clock.now = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)  # the first delivery, an hour after
    memory = SummaryMemory(clock, started=lambda: began)
    # Created long after the controllers began, and delivered for the first time only now.
    assert memory.first_alone(WEB, datetime(2026, 11, 29, 11, 30, tzinfo=UTC))
    assert not memory.first_alone(DB, datetime(2026, 11, 29, 11, 0, 3, tzinfo=UTC))  # within the margin

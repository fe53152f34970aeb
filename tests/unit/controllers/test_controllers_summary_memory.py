"""What the ClusterSummary controller remembers of its own deliveries between passes (ADR 0102):
the credentials each summary was delivered with and what its inventory was pruned down to, kept per
summary, forgotten with the summary, and the prunes forgotten when a shard is taken over."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from fleetwave.controllers import app
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

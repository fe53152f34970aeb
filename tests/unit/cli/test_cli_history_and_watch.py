"""`history --events 0` shows no Event, a watch ends when a rollout is rolled back, and every rollout
kind raises the same Warning Events."""

from __future__ import annotations

from typing import Any

import pytest

from fleetwave.cli import history
from fleetwave.core import effects as fx
from fleetwave.ux import view


def _event(reason: str, at: str) -> dict[str, Any]:
    return {"reason": reason, "lastTimestamp": at, "message": reason}


def test_history_keeps_the_newest_notable_events_and_none_with_zero() -> None:
    events = [_event("RolledBack", "2026-01-02T00:00:00Z"), _event("ClusterFailed", "2026-01-01T00:00:00Z")]
    assert [e["reason"] for e in history._notable(events, 1)] == ["RolledBack"]
    assert history._notable(events, 0) == []


@pytest.mark.parametrize(
    ("phase", "finished"), [("RolledBack", True), ("Failed", True), ("RollingBack", False)]
)
def test_a_watch_ends_when_the_rollout_has_an_outcome(phase: str, finished: bool) -> None:
    assert view.is_finished({"phase": phase, "generation": 2, "observedGeneration": 2}) is finished


@pytest.mark.parametrize("reason", ["RolledBack", "AnalysisFailed", "ClusterLeft", "ClusterFailed"])
def test_what_went_wrong_is_a_warning(reason: str) -> None:
    assert fx.Event(reason, "m").warning


def test_progress_is_normal() -> None:
    assert not fx.Event("StageSucceeded", "m").warning

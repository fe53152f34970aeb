"""A deleted promotion withdraws its stages last first (pure part of `promotion_withdrawal`)."""

from __future__ import annotations

from fleetwave.controllers.sveltos import promotion_withdrawal as pw

STAGES = ["dev", "staging", "production"]


def test_the_last_stage_still_delivering_goes_first() -> None:
    assert pw.next_stage(STAGES, {"dev": True, "staging": True, "production": True}) == "production"
    # A later stage that never started (no profile, no summaries) is skipped, not waited for.
    assert pw.next_stage(STAGES, {"dev": True, "staging": True, "production": False}) == "staging"
    assert pw.next_stage(STAGES, {"dev": True}) == "dev"


def test_nothing_left_means_the_finalizer_can_go() -> None:
    assert pw.next_stage(STAGES, dict.fromkeys(STAGES, False)) is None
    assert pw.next_stage([], {}) is None

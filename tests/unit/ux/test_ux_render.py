"""The rich rendering of a promotion view, read back as text."""

from __future__ import annotations

from datetime import UTC, datetime

from rich.console import Console
from ux_fixtures import promotion, summary

from fleetwave.ux import render
from fleetwave.ux import view as v

NOW = datetime(2030, 1, 1, 0, 0, 20, tzinfo=UTC)


def _text(view: dict[str, object]) -> str:
    console = Console(record=True, width=200, force_terminal=False, color_system=None)
    console.print(render.render(view))
    return console.export_text()


def test_render_shows_stages_clusters_states_and_a_countdown() -> None:
    text = _text(v.promotion_view(promotion(), [summary("ns/member-1")], NOW))
    for expected in (
        "dev",
        "staging",
        "production",
        "WaitingAfter",
        "member-1 done",
        "member-5 pending",
    ):
        assert expected in text
    assert "member-4 failed: helm: bad values" in text
    assert "ns/member-1" not in text  # one namespace for all: names are shortened
    assert "Delay: waiting - waiting for delay until 2030-01-01T00:00:30Z (10s left)" in text


def test_render_tells_how_to_approve_a_stage_that_is_not_approved() -> None:
    text = _text(v.promotion_view(promotion(), [], NOW))
    assert "fleetwave approve promotion hello --stage staging" in text
    approved = _text(v.promotion_view(promotion(approved=True), [], NOW))
    assert "approval: approved" in approved
    assert "--stage staging" not in approved


def test_render_ends_with_the_approve_command_while_a_stage_waits_for_approval() -> None:
    raw = promotion()
    raw["status"]["rollout"]["stages"][1]["gates"] = [
        {"kind": "Approval", "state": "Waiting", "message": "waiting for approval staging"}
    ]
    assert (
        _text(v.promotion_view(raw, [], NOW))
        .rstrip()
        .endswith("to approve: fleetwave approve promotion hello --stage staging")
    )
    assert "to approve:" not in _text(v.promotion_view(promotion(), [], NOW))


def test_render_lists_conditions_and_notes_an_unobserved_generation() -> None:
    text = _text(v.promotion_view(promotion(generation=3, observed=2), [], NOW))
    assert "Ready" in text
    assert "dev waits" in text
    assert "has not seen generation 3" in text


def test_summary_line_has_no_countdown_so_it_only_changes_with_the_rollout() -> None:
    first = render.summary_line(v.promotion_view(promotion(), [summary("ns/member-1")], NOW))
    later = datetime(2030, 1, 1, 0, 0, 25, tzinfo=UTC)
    assert render.summary_line(v.promotion_view(promotion(), [summary("ns/member-1")], later)) == first
    assert first.startswith("hello Waiting | dev: WaitingAfter 1/3")
    assert "staging: Pending 0/1" in first


def test_render_of_a_paused_promotion_says_how_to_resume_it() -> None:
    raw = promotion()
    raw["status"]["rollout"]["phase"] = "Paused"
    assert "to go on: fleetwave resume promotion hello" in _text(v.promotion_view(raw, [], NOW))
    assert "to go on:" not in _text(v.promotion_view(promotion(), [], NOW))

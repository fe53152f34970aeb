"""The status view's data: per-cluster state, countdowns, approvals, the finished test."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from ux_fixtures import HASH, promotion, summary

from fleetwave.ux import view as v

NOW = datetime(2030, 1, 1, 0, 0, 20, tzinfo=UTC)


def _dev(view: dict[str, object]) -> dict[str, object]:
    stage = v.stage_of(view, "dev")  # type: ignore[arg-type]
    assert stage is not None
    return dict(stage)


def test_cluster_states_combine_the_engine_record_and_the_summaries() -> None:
    view = v.promotion_view(promotion(), [summary("ns/member-1")], NOW)
    states = {c["name"]: c["state"] for c in _dev(view)["clusters"]}  # type: ignore[attr-defined]
    assert states == {"ns/member-1": "done", "ns/member-4": "failed", "ns/member-5": "pending"}
    failed = next(c for c in _dev(view)["clusters"] if c["state"] == "failed")  # type: ignore[attr-defined]
    assert failed["message"] == "helm: bad values"


@pytest.mark.parametrize(
    ("kwargs", "state"),
    [
        ({"content_hash": "old"}, "delivering"),  # an earlier revision is not this one done
        ({"ready": "False", "reason": "Unhealthy"}, "delivering"),
        ({"ready": "False", "reason": "Failed", "message": "boom"}, "failed"),
    ],
)
def test_a_started_cluster_is_done_only_when_its_summary_has_this_revision_ready(
    kwargs: dict[str, str], state: str
) -> None:
    view = v.promotion_view(promotion(), [summary("ns/member-1", **kwargs)], NOW)
    assert _dev(view)["clusters"][0]["state"] == state  # type: ignore[index]


def test_a_summary_of_another_stage_profile_does_not_count() -> None:
    view = v.promotion_view(promotion(), [summary("ns/member-1", profile="other-dev")], NOW)
    assert _dev(view)["clusters"][0]["state"] == "delivering"  # type: ignore[index]


def test_a_waiting_delay_gate_carries_the_seconds_left_until_it_opens() -> None:
    gate = _dev(v.promotion_view(promotion(), [], NOW))["gates"][0]  # type: ignore[index]
    assert gate["kind"] == "Delay"
    assert gate["secondsLeft"] == 10.0
    later = _dev(v.promotion_view(promotion(), [], datetime(2030, 1, 1, 0, 1, tzinfo=UTC)))["gates"][0]  # type: ignore[index]
    assert later["secondsLeft"] == 0.0  # overdue is shown as 0, never negative


def test_approval_state_comes_from_the_spec_and_only_manual_stages_have_one() -> None:
    view = v.promotion_view(promotion(approved=True), [], NOW)
    approvals = {s["name"]: s["approval"] for s in view["stages"]}
    assert approvals["dev"] is None
    assert approvals["production"] is None
    assert approvals["staging"]["approved"] is True


def test_waiting_for_approval_lists_stages_whose_approval_gate_waits_unapproved() -> None:
    raw = promotion()
    raw["status"]["rollout"]["stages"][1]["gates"] = [
        {"kind": "Approval", "state": "Waiting", "message": "waiting for approval"}
    ]
    assert v.waiting_for_approval(v.promotion_view(raw, [], NOW)) == ["staging"]
    raw["spec"]["stages"][1]["trigger"]["manual"]["approved"] = True
    assert v.waiting_for_approval(v.promotion_view(raw, [], NOW)) == []


@pytest.mark.parametrize(
    ("phase", "generation", "observed", "finished"),
    [
        ("Succeeded", 3, 3, True),
        ("Failed", 3, 3, True),
        ("Succeeded", 4, 3, False),  # the controller has not seen the latest spec (e.g. an upgrade)
        ("Waiting", 3, 3, False),
    ],
)
def test_finished_means_the_latest_spec_reached_a_terminal_phase(
    phase: str, generation: int, observed: int, finished: bool
) -> None:
    raw = promotion(generation=generation, observed=observed)
    raw["status"]["rollout"]["phase"] = phase
    assert v.is_finished(v.promotion_view(raw, [], NOW)) is finished


def test_before_the_controller_acts_the_stages_come_from_the_spec() -> None:
    raw = promotion()
    del raw["status"]
    view = v.promotion_view(raw, [], NOW)
    assert [s["name"] for s in view["stages"]] == ["dev", "staging", "production"]
    assert all(s["phase"] == "Pending" and s["clusters"] == [] for s in view["stages"])
    assert view["message"] == "waiting for the controller"


def test_the_view_is_json_serialisable_with_the_content_hash() -> None:
    view = v.promotion_view(promotion(), [summary("ns/member-1")], NOW)
    assert json.loads(json.dumps(view))["contentHash"] == HASH

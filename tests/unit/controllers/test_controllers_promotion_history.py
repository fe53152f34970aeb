"""status.revisions of a promotion (issue 13): each new plan is a new numbered revision, the one it
replaced is Superseded unless it had ended, outcomes and approvals are kept, the list is bounded, and
the rollback target is the newest revision that succeeded with other content."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from fleetwave.controllers.sveltos import promotion_history as history
from fleetwave.core import status as st

T0 = datetime(2026, 11, 25, 9, 0, tzinfo=UTC)


def _status(content: str, started: datetime, phase: st.RolloutPhase) -> st.RolloutStatus:
    return st.RolloutStatus(content, "stages", started, (), {}, frozenset(), phase=phase)


def test_revisions_are_numbered_and_end_with_their_outcome() -> None:
    one = history.record([], _status("a", T0, st.RolloutPhase.PROGRESSING), "fw-content-a", "a", T0)
    assert [(e["revision"], e["outcome"]) for e in one] == [(1, "Progressing")]
    one = history.record(one, _status("a", T0, st.RolloutPhase.SUCCEEDED), "fw-content-a", "a", T0)
    assert one[0]["outcome"] == "Succeeded"
    assert one[0]["endedAt"] == "2026-11-25T09:00:00Z"
    later = T0 + timedelta(hours=1)
    approved = {"staging": later + timedelta(minutes=5), "old": T0}
    two = history.record(
        one, _status("b", later, st.RolloutPhase.WAITING), "fw-content-b", "b", later, approved
    )
    assert [(e["revision"], e["outcome"]) for e in two] == [(1, "Succeeded"), (2, "Progressing")]
    assert two[1]["approvals"] == {"staging": "2026-11-25T10:05:00Z"}  # not one from before it began
    three = history.record(
        two, _status("c", later + timedelta(hours=1), st.RolloutPhase.PROGRESSING), "s", "c", later
    )
    assert [e["outcome"] for e in three] == ["Succeeded", "Superseded", "Progressing"]


def test_the_rollback_target_is_the_newest_success_with_other_content() -> None:
    entries: list[dict[str, object]] = []
    for i, (content, phase) in enumerate(
        [("a", st.RolloutPhase.SUCCEEDED), ("b", st.RolloutPhase.FAILED), ("c", st.RolloutPhase.PROGRESSING)]
    ):
        entries = history.record(
            entries, _status(content, T0 + timedelta(hours=i), phase), f"fw-content-{content}", content, T0
        )
    target = history.rollback_target(entries, "c")
    assert target is not None
    assert (target.number, target.snapshot, target.target.label) == (1, "fw-content-a", "revision 1")
    picked = history.rollback_target(entries, "c", wanted=2)
    assert picked is not None
    assert picked.number == 2
    assert history.rollback_target(entries, "c", wanted=3) is None  # the current content
    assert history.rollback_target(entries, "a") is None  # nothing else succeeded


def test_the_list_keeps_the_newest_entries_only() -> None:
    entries: list[dict[str, object]] = []
    for i in range(history.LIMIT + 3):
        status = _status(f"h{i}", T0 + timedelta(minutes=i), st.RolloutPhase.SUCCEEDED)
        entries = history.record(entries, status, f"s{i}", f"h{i}", T0)
    assert len(entries) == history.LIMIT
    assert entries[-1]["revision"] == history.LIMIT + 3
    rolled = replace(
        _status("x", T0 + timedelta(days=1), st.RolloutPhase.ROLLED_BACK),
        rollback=st.RollbackStatus("h12", "revision 13", "failure budget exceeded", T0, ()),
        message="rolled back to revision 13: failure budget exceeded",
    )
    last = history.record(entries, rolled, "sx", "x", T0)[-1]
    assert (last["outcome"], last["rolledBackTo"]) == ("RolledBack", "revision 13")
    assert "failure budget exceeded" in last["message"]


def test_each_stage_names_the_flux_revision_its_clusters_run() -> None:
    """ADR 0103: a stage the new revision reached runs its commit; one it has not reached still runs
    the commit of the newest revision that succeeded before."""
    v1, v2 = ["GitRepository/flux/apps@main@sha1:1111111"], ["GitRepository/flux/apps@main@sha1:2222222"]
    entries = history.record([], _status("a", T0, st.RolloutPhase.SUCCEEDED), "s-a", "a", T0, sources=v1)
    assert entries[0]["sources"] == v1
    stages = (
        st.StageStatus("dev", ("m1",), 1, phase=st.StagePhase.SUCCEEDED),
        st.StageStatus("prod", ("m3",), 1, phase=st.StagePhase.PENDING),
    )
    later = replace(_status("b", T0 + timedelta(hours=1), st.RolloutPhase.WAITING), stages=stages)
    entries = history.record(entries, later, "s-b", "b", T0, sources=v2)
    assert history.running_sources(entries, later, v2) == {"dev": v2, "prod": v1}
    first = replace(_status("a", T0, st.RolloutPhase.WAITING), stages=stages)
    assert history.running_sources(entries[:1], first, v1) == {"dev": v1}  # nothing ran before

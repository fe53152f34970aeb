"""The condition helper every reader and writer of a status condition goes through."""

from __future__ import annotations

from typing import Any

import pytest

from fleetwave.api import conditions

READY = {"type": "Ready", "status": "True", "reason": "Provisioned", "lastTransitionTime": "t0"}
STALLED = {"type": "Stalled", "status": "False", "reason": "Fine"}
STATUS = {"conditions": [STALLED, READY]}


@pytest.mark.parametrize("where", [STATUS, STATUS["conditions"], tuple(STATUS["conditions"])])
def test_find_reads_a_status_or_its_list_of_conditions(where: Any) -> None:
    assert conditions.find(where, "Ready") == READY
    assert conditions.find(where, "Stalled") == STALLED
    assert conditions.find(where, "Available") is None


@pytest.mark.parametrize("where", [None, {}, {"conditions": None}, {"conditions": []}, []])
def test_nothing_to_find_where_there_are_no_conditions(where: Any) -> None:
    assert conditions.find(where, "Ready") is None
    assert conditions.get(where, "Ready") == {}
    assert not conditions.is_true(where, "Ready")


def test_find_returns_the_first_of_a_type_and_skips_entries_that_are_not_objects() -> None:
    later = {**READY, "status": "False"}
    assert conditions.find({"conditions": ["Ready", None, 3, READY, later]}, "Ready") is READY


def test_get_is_find_with_an_empty_mapping_for_absent() -> None:
    assert conditions.get(STATUS, "Ready") == READY
    assert conditions.get(STATUS, "Available").get("status") is None


@pytest.mark.parametrize(
    ("status", "expected"), [("True", True), ("False", False), ("Unknown", False), (None, False)]
)
def test_is_true_only_for_status_true(status: str | None, expected: bool) -> None:
    assert conditions.is_true([{"type": "Ready", "status": status}], "Ready") is expected


def test_cond_is_stamped_now_without_a_previous_condition_of_its_type() -> None:
    assert conditions.cond(STATUS, "Available", "True", "Up", "all up", 3, "t1") == {
        "type": "Available",
        "status": "True",
        "reason": "Up",
        "message": "all up",
        "lastTransitionTime": "t1",
        "observedGeneration": 3,
    }
    assert conditions.cond(None, "Ready", "True", "Provisioned", "", None, "t1")["lastTransitionTime"] == "t1"


def test_cond_keeps_the_transition_time_while_the_status_stays() -> None:
    kept = conditions.cond(STATUS, "Ready", "True", "OtherReason", "new message", 4, "t1")
    assert kept["lastTransitionTime"] == "t0"
    assert (kept["reason"], kept["message"], kept["observedGeneration"]) == ("OtherReason", "new message", 4)
    # The same from the bare list, as staged-run and placement status pass it.
    listed = conditions.cond(STATUS["conditions"], "Ready", "True", "", "", 4, "t1")
    assert listed["lastTransitionTime"] == "t0"


def test_cond_moves_the_transition_time_when_the_status_flips_or_had_none() -> None:
    assert conditions.cond(STATUS, "Ready", "False", "Down", "", 4, "t1")["lastTransitionTime"] == "t1"
    unstamped = {"conditions": [{"type": "Ready", "status": "True"}]}
    assert conditions.cond(unstamped, "Ready", "True", "", "", 4, "t1")["lastTransitionTime"] == "t1"

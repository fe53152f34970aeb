"""What a status write sends: only real differences, and nothing when the stored status is the same."""

from __future__ import annotations

from fleetwave.kube.status import merge_patch, normalized


def test_a_null_the_server_dropped_is_no_difference() -> None:
    stored = normalized({"phase": "Progressing", "stages": [{"name": "dev", "started": ["a"]}]})
    wanted = normalized(
        {
            "phase": "Progressing",
            "approvals": None,
            "stages": [{"name": "dev", "started": ["a"], "deliveredAt": None}],
        }
    )
    assert merge_patch(stored, wanted) is None


def test_a_field_that_became_null_is_removed() -> None:
    stored = normalized({"phase": "Failed", "failureMessage": "boom"})
    wanted = normalized({"phase": "Progressing", "failureMessage": None})
    assert merge_patch(stored, wanted) == {"phase": "Progressing", "failureMessage": None}


def test_a_list_item_that_changed_replaces_the_list() -> None:
    stored = normalized({"stages": [{"name": "dev", "deliveredAt": "t1"}]})
    wanted = normalized({"stages": [{"name": "dev", "deliveredAt": None}]})
    assert merge_patch(stored, wanted) == {"stages": [{"name": "dev"}]}

"""The approval JSON patch and its refusals."""

from __future__ import annotations

from typing import Any

import pytest
from ux_fixtures import promotion

from fleetwave.ux import approval


def test_the_patch_tests_the_stage_name_then_sets_approved_at_its_index() -> None:
    ops = approval.approval_patch(promotion(), "staging")
    assert ops == [
        {"op": "test", "path": "/spec/stages/1/name", "value": "staging"},
        {"op": "add", "path": "/spec/stages/1/trigger/manual/approved", "value": True},
    ]


def test_an_unknown_stage_is_refused_with_the_stages_listed() -> None:
    with pytest.raises(approval.ApprovalError, match=r"no stage 'qa' \(stages: dev, staging, production\)"):
        approval.approval_patch(promotion(), "qa")


@pytest.mark.parametrize("stage", ["dev", "production"])
def test_a_stage_without_a_manual_trigger_is_refused(stage: str) -> None:
    with pytest.raises(approval.ApprovalError, match="has no manual trigger"):
        approval.approval_patch(promotion(), stage)


def test_a_manual_trigger_without_an_approved_field_still_gets_one() -> None:
    raw: dict[str, Any] = promotion()
    raw["spec"]["stages"][1]["trigger"]["manual"] = {}
    assert approval.approval_patch(raw, "staging")[1]["op"] == "add"  # "replace" would fail on a missing key
    assert approval.is_approved(raw, "staging") is False
    assert approval.is_approved(promotion(approved=True), "staging") is True

"""A placement's applyStrategy as the rules every apply to a member follows (ADR 0063)."""

from __future__ import annotations

from typing import Any

import pytest

from fleetwave.api.kubefleet import PlacementSpec
from fleetwave.controllers.kubefleet import apply_rules, unhonoured
from fleetwave.delivery.manifests import ApplyPolicy

SELECTED = [{"group": "", "version": "v1", "kind": "Namespace", "name": "app"}]


def rules(apply: dict[str, Any] | None) -> apply_rules.ApplyRules:
    strategy = {"applyStrategy": apply} if apply is not None else {}
    spec = PlacementSpec.model_validate({"resourceSelectors": SELECTED, "strategy": strategy})
    assert unhonoured.refusal(spec) == ""  # honoured, so never refused
    return apply_rules.of(spec)


@pytest.mark.parametrize(
    ("apply", "policy", "report_diff"),
    [
        (None, ApplyPolicy(), False),
        ({"type": "ClientSideApply"}, ApplyPolicy(), False),
        # Upstream's server-side apply does not force unless told to.
        ({"type": "ServerSideApply"}, ApplyPolicy(force=False), False),
        ({"type": "ServerSideApply", "serverSideApplyConfig": {"force": True}}, ApplyPolicy(), False),
        ({"whenToApply": "IfNotDrifted"}, ApplyPolicy(force=False), False),
        ({"whenToTakeOver": "Never"}, ApplyPolicy(take_over="Never"), False),
        ({"whenToTakeOver": "IfNoDiff"}, ApplyPolicy(take_over="IfNoDiff"), False),
        ({"type": "ReportDiff"}, ApplyPolicy(), True),
    ],
)
def test_each_apply_strategy_becomes_its_rules(
    apply: dict[str, Any] | None, policy: ApplyPolicy, report_diff: bool
) -> None:
    found = rules(apply)
    assert found.policy == policy
    assert found.report_diff is report_diff
    # KubeFleet has no continueOnError: an object that fails never stops the others.
    assert not found.policy.stop_on_error
    assert not found.policy.stop_on_conflict


def test_a_run_whose_placement_is_gone_applies_with_the_defaults() -> None:
    assert apply_rules.of(None) == apply_rules.DEFAULT

"""Webhook gates through translation and the plan simulator (ADR 0080)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError

from fleetwave.api.kubefleet import StagedUpdateStrategySpec
from fleetwave.api.sveltos import Stage
from fleetwave.core import model as m
from fleetwave.core import timeline
from fleetwave.translate import kubefleet as tk
from fleetwave.translate import sveltos as ts

T0 = datetime(2026, 11, 25, 10, 0, tzinfo=UTC)
HOOK = {"name": "smoke", "url": "https://ci.example.com/ok"}


def test_a_promotion_stages_webhooks_come_after_its_health_checks_and_before_its_approval() -> None:
    stage = Stage.model_validate(
        {
            "name": "staging",
            "trigger": {
                "manual": {
                    "delay": "1m",
                    "postDelayHealthChecks": [
                        {"name": "h", "group": "apps", "version": "v1", "kind": "Deployment"}
                    ],
                }
            },
            "webhooks": [HOOK, {**HOOK, "name": "per", "perCluster": True}],
        }
    )
    kinds = [type(g).__name__ for g in ts.trigger_gates(stage, "p")]
    assert kinds == ["Delay", "HealthChecks", "Webhook", "Webhook", "Approval"]
    assert ts.trigger_gates(stage, "p")[3] == m.Webhook("per", per_cluster=True)
    alone = Stage.model_validate({"name": "dev", "webhooks": [HOOK]})
    assert ts.trigger_gates(alone, "p") == (m.Webhook("smoke"),)


def test_a_strategy_stages_webhooks_come_after_its_timed_wait_and_before_its_approval() -> None:
    strategy = StagedUpdateStrategySpec.model_validate(
        {
            "stages": [
                {
                    "name": "canary",
                    "labelSelector": {},
                    "afterStageTasks": [{"type": "Approval"}, {"type": "TimedWait", "waitTime": "1m"}],
                    "webhooks": [HOOK],
                }
            ]
        }
    )
    gates = tk._after_gates(strategy.stages[0], "run")
    assert [type(g).__name__ for g in gates] == ["Delay", "Webhook", "Approval"]


@pytest.mark.parametrize(
    ("hooks", "said"),
    [
        ([HOOK, HOOK], "webhooks"),
        ([{**HOOK, "url": "ftp://x"}], "url"),
        ([{**HOOK, "timeout": "0s"}], "timeout must be more than 0s"),
        ([{**HOOK, "interval": "500ms"}], "interval must be at least 1s"),
        ([{**HOOK, "retries": 6}], "retries"),
        ([{**HOOK, "method": "GET", "perCluster": True}], "${MEMBER-CLUSTER-NAME}"),
    ],
)
def test_invalid_webhooks_are_refused_naming_what_is_wrong(hooks: list[dict[str, Any]], said: str) -> None:
    with pytest.raises(ValidationError) as refused:
        Stage.model_validate({"name": "dev", "webhooks": hooks})
    assert said in str(refused.value)


def test_the_plan_assumes_a_webhook_passes_unless_told_it_fails() -> None:
    stages = (
        m.StageSpec("dev", m.Selector(), after=(m.Webhook("smoke"),)),
        m.StageSpec("prod", m.Selector(match_labels=(("env", "prod"),))),
    )
    spec = m.RolloutSpec("r", m.Revision("c", "s"), stages)
    fleet = m.Fleet.of([m.Cluster("a", {"env": "dev"})])
    passing = timeline.simulate(spec, fleet, T0, timeline.Assumptions())
    assert passing.outcome == "Succeeded"
    failing = timeline.simulate(spec, fleet, T0, timeline.Assumptions(failing_checks=frozenset({"smoke"})))
    assert failing.outcome == "Blocked"
    assert "webhook smoke not passing" in failing.message
